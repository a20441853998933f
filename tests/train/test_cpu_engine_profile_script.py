"""The CPU engine profile's fits (``jigsaw_engine.runtime.profile_fit``, run by
``scripts/measure_cpu_engine_profile.py``): the decode fit recovers known constants, the KV
term (the engine's cost per byte of cache) included; points timed as the machine's speed swings
are scaled to one speed, and the constants fitted at the start's speed move to the typical one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.runtime import profile_fit
from jigsaw_engine.spec import MODEL_CATALOGUE

CPU_PROFILE = Path(__file__).resolve().parents[2] / "jigsaw_engine" / "cost" / "profiles" / "cpu.json"


def test_the_decode_fit_recovers_fixed_per_sequence_and_kv_costs() -> None:
    profile = json.loads(CPU_PROFILE.read_text())
    truth = {"eta_compute": 0.2, "t_fix_s": 1.5e-3, "c_seq_s": 30e-6, "eta_kv": 0.06}
    cost = RooflineCostModel(profile_fit.device_profile(profile, **truth))
    points = []
    for preset in profile_fit.PRESETS:
        for batch, prompt in profile_fit.DECODE_CASES:
            widest = prompt * 3 // 2  # prompts spread to 1.5x, left-padded to the longest
            context = profile_fit.decode_context(batch, widest)
            seconds = cost.decode_iteration_s(MODEL_CATALOGUE[preset], batch=batch, context_tokens=context)
            points.append((preset, batch, widest, seconds))
    eta_compute, t_fix, c_seq, eta_kv, worst = profile_fit.fit_decode(profile, points)
    assert eta_compute == pytest.approx(truth["eta_compute"])
    assert (t_fix, c_seq, eta_kv) == pytest.approx((truth["t_fix_s"], truth["c_seq_s"], truth["eta_kv"]), rel=1e-6)
    assert worst < 1e-6


def test_points_are_scaled_to_one_speed_and_constants_moved_to_the_typical_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The reference work takes 0.3 s at the start, then 0.6 s around a first point (the
    # machine at half speed: its 2 s count as 1 s), 0.3 s around a second, 0.45 s a third.
    times = iter([0.3, 0.3, 0.3, 0.6, 0.6, 0.3, 0.3, 0.45, 0.45])
    monkeypatch.setattr(profile_fit, "reference_seconds", lambda: next(times))
    speed = profile_fit.AtOneSpeed()
    assert speed.start_s == 0.3
    assert speed.scaled(lambda: (2.0, 7.0)) == (1.0, 7.0)
    assert speed.scaled(lambda: (1.0, 0.0))[0] == pytest.approx(1.0)
    assert speed.scaled(lambda: (3.0, 0.0))[0] == pytest.approx(2.0)
    assert speed.typical_ratio == pytest.approx(1.5)  # ratios 2, 1, 1.5
    # At the typical speed (1.5x slower than the start) times are 1.5x longer, efficiencies
    # 1.5x lower, a fraction of work that divides over cores the same; the reference 0.45 s.
    moved = speed.at_typical_speed({"t_fix_s": 0.002, "mfu_train": 0.6, "parallel_fraction": 0.5})
    assert moved == pytest.approx({"t_fix_s": 0.003, "mfu_train": 0.4, "parallel_fraction": 0.5, "reference_s": 0.45})


def test_a_part_measured_again_joins_the_profile_at_its_recorded_speed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # --decode-only: the machine runs the reference work in 0.3 s now, the profile recorded
    # 0.2 s. Constants fitted now are moved to the profile's speed: times 1.5x shorter,
    # efficiencies 1.5x higher; the profile's reference stays as it is.
    monkeypatch.setattr(profile_fit, "reference_seconds", lambda: 0.3)
    speed = profile_fit.AtOneSpeed()
    moved = speed.at_reference({"t_fix_s": 0.003, "eta_compute": 0.2, "c_seq_s": 6e-6}, reference_s=0.2)
    assert moved == pytest.approx({"t_fix_s": 0.002, "eta_compute": 0.3, "c_seq_s": 4e-6})
