"""The cost model's terms for the CPU host that real runs are forecast on: a prefill's fixed
cost, the padded engine's cache merges and cuts, how a forward or update divides over cores, and the
machine's speed against its profile's. GPU profiles keep their figures (none of them sets these)."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import (
    RATE_FIELDS,
    SPEED_FREE_FIELDS,
    TIME_FIELDS,
    DeviceProfile,
    parallel_fraction_for,
    slowed_down,
)
from jigsaw_engine.graph.builder import GraphConfig, build_step_graph
from jigsaw_engine.graph.substage import SubStageGraph
from jigsaw_engine.spec import MODEL_CATALOGUE, parse_pipeline_spec
from jigsaw_engine.spec.models import ModelSpec
from jigsaw_engine.workload.decode_sim import simulate_worker
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.plans import SequencePlan
from tests.engine.builders import make_cost, make_spec

TINY = MODEL_CATALOGUE["tiny-qwen2-1m"]


def test_a_turn_rejoining_a_running_padded_batch_pays_a_prefill_and_a_copy_of_the_whole_cache() -> None:
    # A: a 90-token prompt and one 20-token reply. B: a 10-token prompt, a 5-token turn, a
    # tool whose 3 tokens return at once, then 5 more. After 5 iterations B rejoins with 18
    # tokens of conversation (the torch engine prefills it whole, alone) while A holds 95: the
    # padded engine copies its cache, 2 rows at the widest 95, to merge B's row in.
    cpu = make_cost("cpu").device
    assert cpu.padded_kv_cache and cpu.prefill_fix_s > 0
    padded, paged = RooflineCostModel(cpu), RooflineCostModel(replace(cpu, padded_kv_cache=False))
    plans = [SequencePlan(90, (20,), (), 0), SequencePlan(10, (5, 5), (0.0,), 3)]

    out = simulate_worker(padded, TINY, plans, prefix_cache=False)
    first = padded.prefill_s(TINY, tokens=180, square_tokens=2 * 90 * 90)  # both prompts padded to 90
    rejoin = padded.prefill_s(TINY, tokens=18, square_tokens=18 * 18)
    merge = padded.kv_copy_s(TINY, tokens=2 * 95)
    assert out.prefill_s == pytest.approx(first + rejoin + merge)
    # Each prefill call pays the fixed cost, on top of its FLOPs.
    assert rejoin == pytest.approx(cpu.prefill_fix_s + RooflineCostModel(replace(cpu, prefill_fix_s=0.0)).prefill_s(
        TINY, tokens=18, square_tokens=18 * 18))  # fmt: skip
    # A paged engine (vLLM) writes the new row into its own blocks: no copy.
    unpadded = simulate_worker(paged, TINY, plans, prefix_cache=False)
    assert unpadded.prefill_s == pytest.approx(
        paged.prefill_s(TINY, tokens=100, square_tokens=90 * 90 + 10 * 10) + rejoin
    )


def test_a_padded_batch_copies_the_rows_left_when_one_ends_and_nothing_when_none_is_left() -> None:
    # Two 10-token prompts, replies of 2 and 6 tokens. Two iterations of both rows (they read
    # 2 rows x 10.5 tokens on average), then the short one ends: the torch engine copies the
    # long row out of its cache, 12 columns wide, before decoding it alone 4 more times (12 +
    # 1.5 tokens on average). When the long one ends no row is left, so nothing is copied.
    cpu = make_cost("cpu").device
    padded, paged = RooflineCostModel(cpu), RooflineCostModel(replace(cpu, padded_kv_cache=False))
    plans = [SequencePlan(10, (2,), (), 0), SequencePlan(10, (6,), (), 0)]
    both = 2 * padded.decode_iteration_s(TINY, batch=2, context_tokens=2 * 10.5)
    alone = 4 * padded.decode_iteration_s(TINY, batch=1, context_tokens=12 + 1.5)
    cut = padded.kv_copy_s(TINY, tokens=1 * 12)
    out = simulate_worker(padded, TINY, plans)
    assert out.decode_s == pytest.approx(both + alone + cut)
    assert out.bucket_s["tail"] == pytest.approx(out.decode_s)
    # A paged engine frees the ended row's blocks in place.
    assert simulate_worker(paged, TINY, plans).decode_s == pytest.approx(both + alone)


def test_the_first_prefill_of_a_step_copies_nothing() -> None:
    cpu = make_cost("cpu")
    plans = [SequencePlan(40, (10,), (), 0)] * 4
    out = simulate_worker(cpu, TINY, plans)
    assert out.prefill_s == pytest.approx(cpu.prefill_s(TINY, tokens=160, square_tokens=4 * 40 * 40))


def test_a_second_core_speeds_a_cpu_update_by_the_measured_fraction_and_a_gpu_one_twice() -> None:
    cpu, h100 = make_cost("cpu"), make_cost("h100")
    f = parallel_fraction_for(cpu.device, TINY.num_params)
    assert 0.0 < f < 1.0  # measured: a tiny model's matrices hardly divide over threads
    one = cpu.train_s(TINY, tokens=4096, num_gpus=1)
    two = cpu.train_s(TINY, tokens=4096, num_gpus=2)
    adam = 16.0 * TINY.num_params / cpu.device.hbm_bytes_per_s  # the optimizer's pass is per device
    assert two - adam / 2 == pytest.approx((one - adam) * ((1.0 - f) + f / 2))
    forward_one = cpu.logprob_forward_s(TINY, tokens=4096, num_gpus=1)
    assert cpu.logprob_forward_s(TINY, tokens=4096, num_gpus=2) == pytest.approx(forward_one * ((1.0 - f) + f / 2))
    model = MODEL_CATALOGUE["qwen2.5-7b"]
    assert h100.device.parallel_fraction == 1.0
    assert h100.logprob_forward_s(model, tokens=1e6, num_gpus=8) == pytest.approx(
        h100.logprob_forward_s(model, tokens=1e6, num_gpus=1) / 8
    )


def test_a_narrower_model_divides_less_over_a_cpu_s_cores_as_measured_per_size() -> None:
    cpu = make_cost("cpu")
    (small, f_small), (large, f_large) = cpu.device.parallel_fraction_by_params
    assert f_small < f_large  # measured: per-operator work that does not divide weighs more on a 1M model
    one, wide = MODEL_CATALOGUE["tiny-qwen2-1m"], MODEL_CATALOGUE["tiny-qwen2-6m"]
    assert (one.num_params, wide.num_params) == (small, large)
    speedup = [cpu.train_s(m, tokens=4096, num_gpus=1) / cpu.train_s(m, tokens=4096, num_gpus=2) for m in (one, wide)]
    assert speedup[0] < speedup[1]
    # Between the sizes measured, in log size; outside them, the nearest one's.
    middle = (small * large) ** 0.5
    assert parallel_fraction_for(cpu.device, middle) == pytest.approx((f_small + f_large) / 2)
    assert parallel_fraction_for(cpu.device, small / 10) == f_small
    assert parallel_fraction_for(cpu.device, large * 1000) == f_large
    # A profile with no sizes measured has one fraction for every model (the GPU profiles: 1).
    flat = replace(cpu.device, parallel_fraction_by_params=())
    assert parallel_fraction_for(flat, middle) == flat.parallel_fraction
    assert make_cost("h100").device.parallel_fraction_by_params == ()


@pytest.mark.parametrize("workload", ["gsm8k", "aime_refine"])
def test_a_machine_slower_by_a_factor_makes_every_sub_stage_that_much_longer(workload: str) -> None:
    # Workloads with no tool calls: a tool's wait is its own (a forecast replays it as recorded).
    spec = parse_pipeline_spec(
        make_spec(
            model="tiny-qwen2-1m", workload=workload, resources={"num_gpus": 2}, rollout={"max_response_length": 24}
        )
    )
    plans = sample_step(spec, 0)
    cpu = make_cost("cpu").device
    config = GraphConfig(prefix_cache=False)
    normal = build_step_graph(RooflineCostModel(cpu), spec, plans, pipeline_id="p", step=0, config=config)
    slow = build_step_graph(
        RooflineCostModel(slowed_down(cpu, 1.7)), spec, plans, pipeline_id="p", step=0, config=config
    )
    assert [n.node_id for n in slow.nodes] == [n.node_id for n in normal.nodes]  # the same plan
    for a, b in zip(normal.nodes, slow.nodes, strict=True):
        assert b.duration_s == pytest.approx(1.7 * a.duration_s, rel=1e-9), a.node_id
    with pytest.raises(ValueError, match="factor"):
        slowed_down(cpu, 0.0)


def test_every_number_of_a_device_profile_is_either_slowed_down_or_said_not_to_be() -> None:
    # A field added to DeviceProfile must be classed, or a slower machine's forecast would
    # silently keep it at the profile's speed.
    numbers = {f.name for f in fields(DeviceProfile) if f.name not in ("name", "description", "padded_kv_cache")}
    classed = [*TIME_FIELDS, *RATE_FIELDS, *SPEED_FREE_FIELDS]
    assert sorted(classed) == sorted(numbers)


def test_a_narrow_model_pays_more_per_flop_beside_its_matrix_multiplies() -> None:
    # Measured on this host: per FLOP, tiny-qwen2-1m (128 wide, 4 layers) forwards and trains
    # slower than tiny-qwen2-6m (256 wide, 6 layers); the GPU profiles charge FLOPs alone.
    cpu, h100 = make_cost("cpu"), make_cost("h100")
    assert cpu.device.forward_elementwise_s > 0 and cpu.device.train_elementwise_s > 0
    wide = MODEL_CATALOGUE["tiny-qwen2-6m"]

    def per_flop(cost: RooflineCostModel, model: ModelSpec, kind: str) -> float:
        if kind == "forward":
            return cost.logprob_forward_s(model, tokens=4096, num_gpus=1) / model.num_params
        return cost.train_s(model, tokens=4096, num_gpus=1) / model.num_params

    for kind in ("forward", "train"):
        assert per_flop(cpu, TINY, kind) > 1.1 * per_flop(cpu, wide, kind)
    assert h100.device.forward_elementwise_s == h100.device.train_elementwise_s == 0.0


def _worker_device_s(graph: SubStageGraph) -> dict[int, float]:
    out: dict[int, float] = {}
    for n in graph.nodes:
        if n.worker is not None and n.devices > 0:
            out[n.worker] = out.get(n.worker, 0.0) + n.duration_s
    return out


def test_rollout_workers_sharing_one_interpreter_wait_for_the_serial_share_of_each_other() -> None:
    # Two workers alone take T0 and T1; as threads of one process, with parallel fraction f,
    # each also waits for (1 - f) of the other's time that overlaps it: min(T0, T1).
    spec = parse_pipeline_spec(
        make_spec(
            model="tiny-qwen2-1m",
            workload="aime_refine",
            resources={"num_gpus": 2},
            rollout={"max_response_length": 24},
        )
    )
    plans = sample_step(spec, 0)
    f = 0.4
    cost = RooflineCostModel(replace(make_cost("cpu").device, rollout_threads_parallel_fraction=f))
    apart = build_step_graph(cost, spec, plans, pipeline_id="p", step=0, config=GraphConfig(prefix_cache=False))
    shared = build_step_graph(
        cost, spec, plans, pipeline_id="p", step=0, config=GraphConfig(prefix_cache=False, workers_share_process=True)
    )
    t0, t1 = _worker_device_s(apart).values()
    s0, s1 = _worker_device_s(shared).values()
    overlap = min(t0, t1)
    assert s0 == pytest.approx(t0 + (1 - f) * overlap)
    assert s1 == pytest.approx(t1 + (1 - f) * overlap)

    # Host waits (tool calls, replayed as measured) and the step's training are not charged.
    def rest(graph: SubStageGraph) -> list[tuple[str, float]]:
        return [(n.node_id, n.duration_s) for n in graph.nodes if n.worker is None or n.devices == 0]

    assert rest(shared) == rest(apart)
    # One worker has no one to wait for; a fraction of 1 (GPU engines) charges nothing.
    one = parse_pipeline_spec(make_spec(model="tiny-qwen2-1m", workload="gsm8k", resources={"num_gpus": 1}))
    sharing = GraphConfig(prefix_cache=False, workers_share_process=True)
    alone = build_step_graph(cost, one, sample_step(one, 0), pipeline_id="p", step=0, config=sharing)
    assert alone == build_step_graph(
        cost, one, sample_step(one, 0), pipeline_id="p", step=0, config=GraphConfig(prefix_cache=False)
    )
    parallel = RooflineCostModel(replace(cost.device, rollout_threads_parallel_fraction=1.0))
    assert build_step_graph(parallel, spec, plans, pipeline_id="p", step=0, config=sharing) == build_step_graph(
        parallel, spec, plans, pipeline_id="p", step=0, config=GraphConfig(prefix_cache=False)
    )


def test_the_measured_profile_says_a_second_thread_overlaps_less_than_half_a_tiny_rollout() -> None:
    f = make_cost("cpu").device.rollout_threads_parallel_fraction
    assert 0.0 < f < 0.6  # measured: two workers at once took 0.7-1.0x of one after the other
    assert make_cost("h100").device.rollout_threads_parallel_fraction == 1.0
