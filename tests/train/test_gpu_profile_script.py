"""``scripts/measure_gpu_profile.py`` without a GPU: its tiny CPU run writes a profile the project
loads, its plain-torch model decodes as it prefills (and as transformers computes), its fits
recover known constants, and its plan for a GPU fits in the slot."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from jigsaw_engine.cost import device as device_module
from jigsaw_engine.cost.cost_model import RooflineCostModel, smooth_max
from jigsaw_engine.cost.device import DeviceProfile
from jigsaw_engine.spec import MODEL_CATALOGUE
from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "measure_gpu_profile.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("measure_gpu_profile")


def load_profile(directory: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> DeviceProfile:
    """The project's own loader, pointed at ``directory``."""
    monkeypatch.setattr(device_module, "PROFILE_DIR", directory)
    device_module.load_device_profile.cache_clear()
    try:
        return device_module.load_device_profile(name)
    finally:
        device_module.load_device_profile.cache_clear()


def test_quick_cpu_run_writes_a_profile_the_cost_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "x.json"
    start = time.perf_counter()
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--out", str(out), "--budget-s", "50"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    duration_s = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert duration_s < 60

    raw = json.loads(out.read_text())
    assert raw["name"] == "x"
    assert "measure_gpu_profile.py" in raw["description"] and torch.__version__ in raw["description"]
    profile = load_profile(tmp_path, "x", monkeypatch)
    assert set(raw) == {f for f in DeviceProfile.__dataclass_fields__}  # nothing the loader would drop
    for eta in (profile.eta_weights, profile.eta_kv, profile.eta_compute, profile.eta_prefill):
        assert 0.0 < eta <= 1.0
    assert 0.0 < profile.mfu_train <= 1.0 and 0.0 < profile.mfu_forward <= 1.0
    assert profile.peak_flops_bf16 > 1e8 and profile.hbm_bytes_per_s > 1e8 and profile.memory_bytes > 2**30

    cost = RooflineCostModel(profile)
    model = MODEL_CATALOGUE["qwen3-0.6b"]
    t = {(b, c): cost.decode_iteration_s(model, batch=b, context_tokens=b * c) for b in (1, 8) for c in (512, 4096)}
    assert all(0.0 < v < 100.0 for v in t.values())
    assert t[(1, 512)] < t[(8, 512)] and t[(1, 512)] < t[(1, 4096)]  # grows with batch and with context
    assert cost.train_s(model, tokens=8192, num_gpus=1) > 0.0

    points = json.loads(Path(f"{out}.points.json").read_text())
    steps = [p for p in points["decode"] if "kind" not in p]
    assert {(p["batch"], p["context"]) for p in steps if p["status"] == "measured"} == {
        (b, c) for b in (1, 4) for c in (32, 64)
    }
    assert all(p["seconds"] > 0 and "error_pct" in p for p in steps)
    kinds = {(p["kind"], p["tokens"]) for p in points["model"] if p["status"] == "measured"}
    assert {("prefill", 64), ("logprob_forward", 128), ("train_forward_backward", 128)} <= kinds
    assert len(points["weight_streaming"]) == 8
    assert "partial" not in points
    assert set(points["carried"]) >= {"nvlink_bytes_per_s", "sync_alpha_s"}


def test_quick_run_refuses_to_write_into_the_project_profiles(script: ModuleType) -> None:
    with pytest.raises(SystemExit, match="--quick needs --out"):
        script.main(["--device", "cpu", "--quick"])


def test_decode_from_the_cache_matches_the_full_forward(script: ModuleType) -> None:
    torch.manual_seed(0)
    arch = script.TINY
    model = script.Decoder(arch, torch.device("cpu"), torch.float32, max_positions=32)
    ids = torch.randint(arch.vocab, (3, 10))
    buf = torch.zeros(3 * 10 * arch.kv_elements_per_token)
    cache = script.cache_views(buf, arch, 3, 10)
    with torch.no_grad():
        full = model(ids)
        prefill = model(ids[:, :9], cache=cache)
        step = model.decode(ids[:, 9], cache, 9)
        tokens = script.sample(step)
    torch.testing.assert_close(prefill, full[:, :9])
    torch.testing.assert_close(step, full[:, 9], rtol=1e-5, atol=1e-5)
    assert tokens.shape == (3,) and int(tokens.max()) < arch.vocab


def test_an_hf_checkpoint_loads_into_the_plain_torch_model(script: ModuleType, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Qwen3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
        max_position_embeddings=64,
    )
    hf = transformers.Qwen3ForCausalLM(config).eval()
    with torch.no_grad():  # perturb every tensor, norms included, so that a mis-mapped one shows
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    hf.save_pretrained(tmp_path)

    arch = script.arch_from_hf_config("tiny-qwen3", json.loads((tmp_path / "config.json").read_text()))
    assert (arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.head_dim) == (2, 64, 4, 2, 16)
    assert arch.qk_norm and arch.tied_embeddings and not arch.qkv_bias
    assert arch.num_params == hf.num_parameters() - sum(
        p.numel() for n, p in hf.named_parameters() if "norm" in n
    )  # the cost model's count: every weight matrix, no norms
    model = script.Decoder(arch, torch.device("cpu"), torch.float32, max_positions=64)
    assert script.load_hf_weights(model, tmp_path)
    ids = torch.randint(arch.vocab, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, rtol=1e-4, atol=1e-4)


def synthetic_measurements(script: ModuleType, truth: dict[str, float]) -> dict[str, Any]:
    """What a GPU run would record if the device followed the cost model exactly."""
    plan, elem = script.FULL, 2
    arch, peak, hbm = plan.arch, truth["peak"], truth["hbm"]
    n = arch.num_params
    stream = [
        {"k": k, "n": m, "tokens": t, "bytes": elem * k * m}
        | {"seconds": truth["overhead"] + elem * k * m / (truth["eta_w"] * hbm)}
        for k, m in plan.stream_shapes
        for t in plan.stream_tokens
    ]
    decode = []
    for b, c in script.decode_points(plan):
        kv = b * c * arch.kv_elements_per_token * elem
        linear = smooth_max(n * elem / (truth["eta_w"] * hbm), 2.0 * n * b / (truth["eta_c"] * peak))
        seconds = truth["t_fix"] + truth["c_seq"] * b + linear + kv / (truth["eta_kv"] * hbm)
        decode.append({"batch": b, "context": c, "kv_bytes": kv, "status": "measured", "seconds": seconds})
    model = [
        {"kind": kind, "tokens": tokens, "status": "measured", "flops": f * n * tokens}
        | {"seconds": f * n * tokens / (eta * peak)}
        for kind, f, eta, tokens in (
            ("prefill", 2.0, 0.5, 2048),
            ("logprob_forward", 2.0, 0.45, 8192),
            ("logprob_forward", 2.0, 0.2, 2048),  # a smaller count: not the one the profile takes
            ("train_forward_backward", 6.0, 0.4, 8192),
        )
    ]
    return {
        "gemm": {"flops_per_s": {"8192^3": peak, "4096^3": 0.9 * peak}, "layer_flops_per_s": truth["eta_c"] * peak},
        "bandwidth": {"copy_bytes_per_s": hbm, "add_bytes_per_s": 0.97 * hbm},
        "memory_bytes": 150e9,
        "weight_streaming": stream,
        "decode": decode,
        "model": model,
        "host_copy": {"h2d_bytes_per_s": 55e9, "d2h_bytes_per_s": 50e9},
    }


def test_fits_recover_the_constants_of_a_device_that_follows_the_cost_model(script: ModuleType) -> None:
    truth = {
        "peak": 800e12,
        "hbm": 4.4e12,
        "eta_c": 0.75,
        "eta_w": 0.85,
        "overhead": 4e-6,
        "t_fix": 1.2e-3,
        "c_seq": 8e-6,
        "eta_kv": 0.65,
    }
    measured = synthetic_measurements(script, truth)
    notes: list[str] = []
    profile, carried = script.derive_profile(measured, script.FULL, 2, dict(script.DEFAULTS), notes)
    expected = {
        "peak_flops_bf16": truth["peak"],
        "hbm_bytes_per_s": truth["hbm"],
        "eta_compute": truth["eta_c"],
        "eta_weights": truth["eta_w"],
        "linear_op_overhead_s": truth["overhead"],
        "t_fix_s": truth["t_fix"],
        "c_seq_s": truth["c_seq"],
        "eta_kv": truth["eta_kv"],
        "eta_prefill": 0.5,
        "mfu_forward": 0.45,
        "mfu_train": 0.4,
        "pcie_bytes_per_s": 55e9,
        "memory_bytes": 150e9,
    }
    for key, value in expected.items():
        assert profile[key] == pytest.approx(value, rel=1e-6), key
    assert sorted(carried) == sorted(script.CARRIED_KEYS)
    assert notes == []
    script.check_decode_fit(measured, profile, script.FULL, 2)
    assert all(abs(p["error_pct"]) < 1e-6 for p in measured["decode"])


def test_missing_phases_are_carried_from_the_base_profile(script: ModuleType) -> None:
    base = dict(script.DEFAULTS) | {"t_fix_s": 3e-3, "eta_kv": 0.5}
    measured = {"gemm": {"flops_per_s": {"4096^3": 5e14}, "layer_flops_per_s": 3e14}, "memory_bytes": 80e9}
    profile, carried = script.derive_profile(measured, script.FULL, 2, base, [])
    assert profile["peak_flops_bf16"] == 5e14 and profile["eta_compute"] == pytest.approx(0.6)
    assert profile["t_fix_s"] == 3e-3 and profile["eta_kv"] == 0.5
    assert {"t_fix_s", "eta_kv", "hbm_bytes_per_s", "mfu_train"} <= set(carried)


def test_the_gpu_plan_fits_an_8_minute_slot(script: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan's pessimistic estimate for an H200 (from the modelled h200 profile) leaves at least
    4x headroom in a 450 s budget; the points that cannot fit in its memory are the ones expected."""
    assert script.main(["--plan", "--name", "h200", "--budget-s", "450"]) == 0
    text = capsys.readouterr().out
    total_s = float(text.split("total ~")[1].split(" s")[0])
    assert total_s < 450 / 4
    assert "batch  512 x context  8192: KV   481.0 GB, does not fit" in text
    assert text.count("does not fit") <= 3


def test_device_names_become_the_profile_names_a_cluster_spec_selects(script: ModuleType) -> None:
    cuda = torch.device("cuda")
    assert script.slug_device("NVIDIA H200", cuda) == "h200"
    assert script.slug_device("NVIDIA H100 80GB HBM3", cuda) == "h100"
    assert script.slug_device("NVIDIA A100-SXM4-80GB", cuda) == "a100"
    assert script.slug_device("NVIDIA GeForce RTX 4090", cuda) == "rtx-4090"
    assert script.slug_device("Intel(R) Xeon(R) Processor", torch.device("cpu")) == "cpu-torch"
