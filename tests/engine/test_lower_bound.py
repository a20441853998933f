"""Throughput lower bound T_LB(N): hand-worked, below the simulator, monotone in devices and steps."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.lower_bound import PipelineWork, chain_s, lower_bound, pipeline_work, roofline_device
from jigsaw_engine.sim.step_sim import simulate_step
from jigsaw_engine.spec import MODEL_CATALOGUE, PipelineSpec, parse_pipeline_spec
from jigsaw_engine.spec.presets import PRESETS
from jigsaw_engine.workload.decode_sim import simulate_worker
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.plans import SequencePlan
from tests.engine.builders import make_cluster, make_cost, make_spec

PRESET_SPECS: dict[str, dict[str, Any]] = {p.name: p.spec for p in PRESETS}
SIM_CASES: list[tuple[str, dict[str, Any]]] = [
    *PRESET_SPECS.items(),
    ("gsm8k", make_spec(workload="gsm8k")),
    ("math", make_spec(workload="math", data={"train_batch_size": 32}, rollout={"max_response_length": 4096})),
    ("search", make_spec(workload="search", model="qwen2.5-3b")),
    ("math-ppo", make_spec(workload="math", algorithm="ppo")),
    ("math-rloo-tp2", make_spec(workload="math", algorithm="rloo", resources={"num_gpus": 4, "tp": 2})),
]
SEEDS = (0, 1, 7)


def spec_of(data: dict[str, Any], seed: int = 0) -> PipelineSpec:
    return parse_pipeline_spec({**data, "seed": seed})


def test_single_sequence_by_hand() -> None:
    # Qwen2.5-1.5B on H100, 2 GPUs, tp 1, GRPO. One sequence: 100-token prompt, a 50-token
    # turn, a 2 s tool call returning 20 tokens, a 30-token turn: 200 trained tokens.
    #   decode at batch 1: t(1, c) = 3.0416 ms + c * 1.2227e-8 s (t_fix 2 ms + c_seq 20 us +
    #     smooth_max(weights 1.0216 ms, compute 4.4 us) + 20 us of kernel overheads)
    #     contexts 100..149 (sum 6225) then 170..199 (sum 5535): 80 * 3.0416 ms + 11760 * 1.22e-8
    #     = 0.24347 s
    #   prefill 100 + 20 tokens: 0.57 + 0.11 ms; tool wait 2.0 s
    #   its log-prob forward, 200 tokens on 2 GPUs: 0.94 ms (attention: 4 x 28 layers x 1536 x
    #     200^2 = 6.9 GFLOPs on top of 2N x 200 = 616 GFLOPs); training on 2 GPUs: 6.92 ms
    #   weight sync: 1 s + 3.08 GB / 30 GB/s = 1.10267 s
    #   critical path = 0.00068 + 0.24347 + 2.0 + 0.00094 + 0.00692 + 1.10267 = 3.3547 s
    cost, spec = make_cost(), parse_pipeline_spec(make_spec())
    model = MODEL_CATALOGUE["qwen2.5-1.5b"]
    plan = SequencePlan(100, (50, 30), (2.0,), 20)
    work = pipeline_work(cost, spec, [plan])

    def t1(context: int) -> float:
        return cost.decode_iteration_s(model, batch=1, context_tokens=context)

    decode_s = sum(t1(100 + i) for i in range(50)) + sum(t1(170 + i) for i in range(30))
    expected = (
        cost.prefill_s(model, tokens=100)
        + decode_s
        + cost.prefill_s(model, tokens=20)
        + 2.0
        + cost.logprob_forward_s(model, tokens=200, num_gpus=2, square_tokens=200**2)
        + cost.train_s(model, tokens=200, num_gpus=2, square_tokens=200**2)
        + cost.weight_sync_s(model)
    )
    assert work.critical_path_s == pytest.approx(expected, rel=1e-12)
    assert work.critical_path_s == pytest.approx(3.3547, rel=3e-5)
    # One sequence can only ever run at batch 1, so the ideal decode work is that same sum.
    assert work.decode_batch == 1
    assert work.decode_gpu_s == pytest.approx(decode_s, rel=1e-12)
    assert work.prefill_gpu_s == pytest.approx(cost.prefill_s(model, tokens=120), rel=1e-12)
    # GRPO charges a reference forward equal to the old-policy one: 200 tokens on one GPU.
    assert work.ref_logprob_gpu_s == work.old_logprob_gpu_s
    assert work.old_logprob_gpu_s == pytest.approx(
        cost.logprob_forward_s(model, tokens=200, num_gpus=1, square_tokens=200**2)
    )


@pytest.mark.parametrize(
    ("algorithm", "ref_forwards", "train_units"),
    [
        # train_units: actor updates + critic updates (each one train_s) on top of the forwards.
        ("grpo", 1, 1),
        ("ppo", 1, 2),  # + critic values forward (counted in train) and critic update
        ("rloo", 0, 1),
        ("dapo", 0, 1),
    ],
)
def test_algorithm_rules_follow_step_sim(algorithm: str, ref_forwards: int, train_units: int) -> None:
    cost = make_cost()
    spec = parse_pipeline_spec(make_spec(algorithm=algorithm))
    work = pipeline_work(cost, spec, sample_step(spec, 0))
    plans = sample_step(spec, 0)
    tokens, square = sum(p.total_tokens for p in plans), sum(p.total_tokens**2 for p in plans)
    forward = cost.logprob_forward_s(spec.model, tokens=tokens, num_gpus=1, square_tokens=square)
    train = cost.train_s(spec.model, tokens=tokens, num_gpus=1, square_tokens=square)
    assert work.ref_logprob_gpu_s == pytest.approx(ref_forwards * forward)
    critic_forward = forward if algorithm == "ppo" else 0.0
    assert work.train_gpu_s == pytest.approx(train_units * train + critic_forward)


def test_roofline_profile_is_the_physical_limit() -> None:
    # 1e6 tokens of a 7B update on 8 H100s at peak: 6 * 7.62e9 * 1e6 / (8 * 989e12) = 5.779 s,
    # plus Adam 16 * 7.62e9 B / (8 * 3.35e12 B/s) = 4.55 ms; no framework factor, no MFU.
    ideal = RooflineCostModel(roofline_device(make_cost().device))
    model = MODEL_CATALOGUE["qwen2.5-7b"]
    assert ideal.train_s(model, tokens=1e6, num_gpus=8) == pytest.approx(5.7785 + 0.00455, rel=1e-3)
    # Batch-1 decode, no context: only the weights at full HBM bandwidth (15.24 GB / 3.35 TB/s
    # = 4.549 ms) in quadrature with 15.24 GFLOP at peak (15 us): 4.549 ms.
    assert ideal.decode_iteration_s(model, batch=1, context_tokens=0) == pytest.approx(4.549e-3, rel=1e-3)
    assert ideal.weight_sync_s(model) == pytest.approx(15.24e9 / 30e9)


@pytest.mark.parametrize("device_type", ["h100", "a100"])
@pytest.mark.parametrize("num_devices", [1, 4, 64])
def test_roofline_never_exceeds_practical(device_type: str, num_devices: int) -> None:
    cost = make_cost(device_type)
    pipelines = [(spec_of(data), [sample_step(spec_of(data), 0)]) for _, data in SIM_CASES]
    for entry in pipelines:
        bound = lower_bound(cost, [entry], num_devices)
        assert 0 < bound.roofline_s <= bound.practical_s
        for p in bound.pipelines:
            assert p.roofline_work_gpu_s <= p.work_gpu_s
            assert p.roofline_critical_path_s <= p.critical_path_s
    together = lower_bound(cost, pipelines, num_devices)
    assert 0 < together.roofline_s <= together.practical_s


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("name", "data"), SIM_CASES, ids=[name for name, _ in SIM_CASES])
def test_bound_is_below_and_near_the_simulated_step(name: str, data: dict[str, Any], seed: int) -> None:
    # A pipeline alone on its own devices, with the plans simulate_step samples itself: the
    # practical bound must not exceed the simulated step, and should be within 5x of it.
    cost, spec = make_cost(), spec_of(data, seed)
    steps = [0, 1]
    simulated_s = sum(simulate_step(cost, spec, s).duration_s for s in steps)
    bound = lower_bound(cost, [(spec, [sample_step(spec, s) for s in steps])], spec.resources.num_gpus)
    ratio = bound.practical_s / simulated_s
    binding = "work" if bound.practical_work_term_s >= bound.practical_path_term_s else "path"
    roofline_ratio = bound.roofline_s / simulated_s
    print(
        f"\n{name:14s} seed {seed}: sim {simulated_s:8.2f} s  practical {bound.practical_s:8.2f} s ({binding})  "
        f"roofline {bound.roofline_s:7.2f} s  practical/sim {ratio:.2f}  roofline/sim {roofline_ratio:.2f}"
    )
    assert bound.practical_s <= simulated_s
    assert ratio > 0.2, f"bound uselessly loose: {ratio:.2f}"


@pytest.mark.parametrize("device_type", ["h100", "a100"])
def test_more_devices_never_raise_the_bound(device_type: str) -> None:
    # M3-like mix: search 3B + GSM8K 1.5B + math 1.5B, three steps each.
    cost = make_cost(device_type)
    mix = [
        spec_of(make_spec(name="search", workload="search", model="qwen2.5-3b")),
        spec_of(make_spec(name="gsm8k", workload="gsm8k")),
        spec_of(make_spec(name="math", workload="math"), seed=3),
    ]
    pipelines = [(s, [sample_step(s, k) for k in range(3)]) for s in mix]
    sizes = [1, 2, 3, 4, 8, 16, 64, 1024]
    bounds = [lower_bound(cost, pipelines, n) for n in sizes]
    for fewer, more in pairwise(bounds):
        assert more.practical_s <= fewer.practical_s
        assert more.roofline_s <= fewer.roofline_s
    # Enough devices: only the critical path is left, and it no longer moves.
    assert bounds[-1].practical_s == bounds[-1].practical_path_term_s == bounds[-2].practical_s
    # One device: all the work in series.
    assert bounds[0].practical_s == pytest.approx(sum(p.work_gpu_s for p in bounds[0].pipelines))


@pytest.mark.parametrize("num_devices", [1, 8, make_cluster(64).num_devices])
def test_doubling_the_steps_doubles_the_work_term(num_devices: int) -> None:
    cost = make_cost()
    spec = spec_of(make_spec(workload="math"))
    steps = [sample_step(spec, k) for k in range(2)]
    once = lower_bound(cost, [(spec, steps)], num_devices)
    twice = lower_bound(cost, [(spec, steps + steps)], num_devices)
    assert twice.pipelines[0].num_steps == 4
    assert twice.practical_work_term_s == pytest.approx(2 * once.practical_work_term_s, rel=1e-12)
    # Sync steps run one after another, so the critical path doubles too.
    assert twice.practical_path_term_s == pytest.approx(2 * once.practical_path_term_s, rel=1e-12)
    assert twice.practical_s == pytest.approx(2 * once.practical_s, rel=1e-12)


def _step(rollout_s: float, update_s: float, sync_s: float) -> PipelineWork:
    return PipelineWork(0.0, 0.0, 0.0, 0.0, 0.0, 1, rollout_s, update_s, sync_s)


@pytest.mark.parametrize(
    ("staleness", "expected_s"),
    [
        # Three steps, each rollout 10 s, update 3 s, sync 1 s.
        (0, 42.0),  # strictly serial: 3 * (10 + 3 + 1)
        # 1: step 0 trained at 13, synced 14; step 1 rolls out on the initial weights:
        #    trained max(13, 10) + 3 = 16, synced 17; step 2 waits for step 0's weights (14):
        #    trained max(16, 14 + 10) + 3 = 27, synced 28.
        (1, 28.0),
        # 2: every rollout starts at 0: trained 13, 16, 19; last synced 20.
        (2, 20.0),
    ],
)
def test_async_chain_lets_rollouts_run_ahead(staleness: int, expected_s: float) -> None:
    assert chain_s([_step(10.0, 3.0, 1.0)] * 3, staleness) == pytest.approx(expected_s)


def test_async_pipeline_has_a_shorter_path_than_sync() -> None:
    cost = make_cost()
    sync = spec_of(make_spec(workload="math"))
    stale = spec_of(make_spec(workload="math", mode="async", staleness=1))
    steps = [sample_step(sync, k) for k in range(4)]
    sync_path = lower_bound(cost, [(sync, steps)], 1024).practical_path_term_s
    async_path = lower_bound(cost, [(stale, steps)], 1024).practical_path_term_s
    assert async_path < sync_path


def test_rejects_no_devices() -> None:
    with pytest.raises(ValueError, match="num_devices must be >= 1"):
        lower_bound(make_cost(), [], 0)


def test_a_sync_step_needs_as_many_decode_iterations_as_its_longest_sequence() -> None:
    # Qwen2.5-1.5B, sync. One 100-token response and three 10-token ones (10-token prompts):
    # 130 tokens. Four fit at once, so batches of 4 would need 32.5 iterations; but the long
    # sequence gains one token per iteration, so any schedule runs at least 100 iterations.
    # The cheapest 100 carry 1.3 tokens each; rounded up to 2 (fewer, fuller iterations: still
    # a bound), 65 iterations of t(2, 2 x mean context). The KV term is the same either way
    # (linear in the context summed over tokens). An async step's iterations may be shared with
    # the next step's sequences, so it keeps the full-batch charge.
    cost, model = make_cost(), MODEL_CATALOGUE["qwen2.5-1.5b"]
    plans = [SequencePlan(10, (100,), (), 0)] + [SequencePlan(10, (10,), (), 0)] * 3
    contexts = sum(10 * n + n * (n - 1) / 2 for n in (100, 10, 10, 10))  # context per token, summed
    mean_context = contexts / 130
    sync = pipeline_work(cost, spec_of(make_spec()), plans)
    assert sync.decode_batch == 2
    expected = 65 * cost.decode_iteration_s(model, batch=2, context_tokens=2 * mean_context)
    assert sync.decode_gpu_s == pytest.approx(expected, rel=1e-12)
    stale = pipeline_work(cost, spec_of(make_spec(mode="async", staleness=1)), plans)
    assert stale.decode_batch == 8  # two steps' sequences in flight
    assert stale.decode_gpu_s == pytest.approx(
        130 / 8 * cost.decode_iteration_s(model, batch=8, context_tokens=8 * mean_context), rel=1e-12
    )
    # Still below what a real worker does: it decodes the same four at batch 4, then 1.
    assert sync.decode_gpu_s <= simulate_worker(cost, model, plans).decode_s
