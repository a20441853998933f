"""The CPU device profile measured by ``scripts/measure_cpu_profile.py``: loadable, physically sane,
and usable by the cost model and the simulator end to end."""

from __future__ import annotations

import math

from jigsaw_engine.contracts import EventKind
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.spec import MODEL_CATALOGUE
from jigsaw_engine.spec.cluster import parse_cluster_spec
from tests.engine.builders import make_cost, make_spec

GIB = 2**30


def test_cpu_profile_loads_with_sane_values() -> None:
    d = load_device_profile("cpu")
    assert d.name == "cpu"
    assert "fp32" in d.description  # no bf16 on this path: the peak is an fp32 GEMM
    assert 1e9 < d.peak_flops_bf16 < 1e13
    assert 1e9 < d.hbm_bytes_per_s < 5e11
    assert d.memory_bytes > GIB
    for eta in (d.eta_weights, d.eta_kv, d.eta_compute, d.eta_prefill, d.mfu_forward, d.mfu_train):
        assert 0.0 < eta <= 1.0
    # The engine constants are fitted on the project's torch engine and trainer: a tiny model's
    # decode GEMMs (128-256 wide, a few rows) reach less of the peak than its batched forwards.
    assert "measure_cpu_engine_profile.py" in d.description
    assert d.eta_compute < min(d.mfu_forward, d.mfu_train)
    assert 0.0 < d.reward_s_per_sequence < 0.002  # grading inside episodes: only the batch is left
    for rate in (d.nvlink_bytes_per_s, d.inter_node_bytes_per_s, d.pcie_bytes_per_s, d.sync_bytes_per_s):
        assert 1e8 < rate < 5e11
    for seconds in (d.t_fix_s, d.c_seq_s, d.sync_alpha_s, d.linear_op_overhead_s):
        assert 0.0 <= seconds < 1.0


def test_cpu_decode_is_sane_and_much_slower_than_h100() -> None:
    model = MODEL_CATALOGUE["qwen3-0.6b"]
    cpu, h100 = make_cost("cpu"), make_cost("h100")
    t1 = cpu.decode_iteration_s(model, batch=1, context_tokens=512)
    t16 = cpu.decode_iteration_s(model, batch=16, context_tokens=16 * 512)
    assert math.isfinite(t1) and 1e-3 < t1 < 10.0  # 1.2 GB of weights over tens of GB/s
    assert t1 < t16 < 16 * t1  # batching amortises the weights
    assert t1 > 10 * h100.decode_iteration_s(model, batch=1, context_tokens=512)
    assert cpu.kv_capacity_tokens(model) > 0


def test_cpu_cluster_runs_a_tiny_pipeline_end_to_end() -> None:
    cluster = parse_cluster_spec({"num_nodes": 1, "devices_per_node": 1, "device_type": "cpu"})
    c = ClusterController(cluster, make_cost(cluster.device_type))
    c.submit(
        "p",
        make_spec(
            model="qwen3-0.6b",
            data={"train_batch_size": 4},
            rollout={"n": 2, "max_response_length": 128},
            resources={"num_gpus": 1},
            trainer={"total_steps": 2},
        ),
    )
    end_s = c.run_until_idle()
    events = c.events.since(0, 10_000)
    statuses = [e.data["status"] for e in events if e.kind is EventKind.STATUS]
    assert statuses == ["queued", "starting", "running", "succeeded"]
    assert [e.data["step"] for e in events if e.kind is EventKind.METRICS] == [1, 2]
    assert math.isfinite(end_s) and end_s > 0


def test_the_vllm_override_replaces_only_the_rollout_constants() -> None:
    # Real runs whose rollouts are on vLLM are forecast with the constants measured on it
    # (scripts/measure_cpu_engine_profile.py --engine vllm); the rest stays the profile's.
    torch_engine, vllm = load_device_profile("cpu", "torch"), load_device_profile("cpu", "vllm")
    assert torch_engine == load_device_profile("cpu")  # the torch engine's are the profile's own
    assert torch_engine.padded_kv_cache and not vllm.padded_kv_cache
    assert torch_engine.weight_load_s == 0.0 < vllm.weight_load_s < 0.2
    assert "--engine vllm" in vllm.description and vllm.description.startswith(torch_engine.description)
    changed = {"description", "t_fix_s", "c_seq_s", "eta_kv", "eta_compute", "prefill_fix_s", "eta_prefill"}
    changed |= {"prefill_seq_s", "padded_kv_cache", "weight_load_s", "rollout_threads_parallel_fraction"}
    for name in set(torch_engine.__dataclass_fields__) - changed:
        assert getattr(vllm, name) == getattr(torch_engine, name), name
    for name in changed - {"description", "padded_kv_cache"}:
        assert getattr(vllm, name) != getattr(torch_engine, name), name
    assert load_device_profile("h100", "vllm") == load_device_profile("h100")  # GPU profiles hold none
