"""``scripts/measure_cpu_engine_profile.py``'s decode fit recovers known constants, the KV term
(the engine's cost per byte of cache) included."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import DeviceProfile
from jigsaw_engine.spec import MODEL_CATALOGUE
from tests.scripts import load_script

CPU_PROFILE = Path(__file__).resolve().parents[2] / "jigsaw_engine" / "cost" / "profiles" / "cpu.json"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("measure_cpu_engine_profile")


def test_the_decode_fit_recovers_fixed_per_sequence_and_kv_costs(script: ModuleType) -> None:
    profile = json.loads(CPU_PROFILE.read_text())
    truth = {"eta_compute": 0.2, "t_fix_s": 1.5e-3, "c_seq_s": 30e-6, "eta_kv": 0.06}
    cost = RooflineCostModel(DeviceProfile(**{**profile, **truth}))
    points = []
    for preset in script.PRESETS:
        for prompt in script.DECODE_PROMPTS:
            for batch in script.DECODE_BATCHES:
                context = script.decode_context(batch, prompt)
                seconds = cost.decode_iteration_s(MODEL_CATALOGUE[preset], batch=batch, context_tokens=context)
                points.append((preset, batch, prompt, seconds))
    eta_compute, t_fix, c_seq, eta_kv, worst = script.fit_decode(profile, points)
    assert eta_compute == pytest.approx(truth["eta_compute"])
    assert (t_fix, c_seq, eta_kv) == pytest.approx((truth["t_fix_s"], truth["c_seq_s"], truth["eta_kv"]), rel=1e-6)
    assert worst < 1e-6
