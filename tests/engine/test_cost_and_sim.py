"""Cost model sanity points and the rollout simulator's invariants."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from jigsaw_engine.contracts import EventKind
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.interference import MODELLED_DESCRIPTION, TABLE_PATH, table_rows
from jigsaw_engine.sim.step_sim import simulate_step
from jigsaw_engine.spec import MODEL_CATALOGUE, parse_pipeline_spec
from jigsaw_engine.spec.models import ModelSpec
from jigsaw_engine.workload.decode_sim import simulate_worker
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.plans import SequencePlan
from tests.engine.builders import make_cluster, make_cost, make_spec


def test_a100_7b_batch1_decode_is_about_12ms() -> None:
    # weights 15.24 GB / (0.78 * 2.039 TB/s) = 9.58 ms, + t_fix 2.5 ms + 20 us = 12.1 ms
    # (eta_weights 0.78 fitted to Vidur's A100 linear-layer profiles; docs/cost-model.md: about 12 ms).
    t = make_cost("a100").decode_iteration_s(MODEL_CATALOGUE["qwen2.5-7b"], batch=1, context_tokens=0)
    assert t == pytest.approx(0.0121, rel=0.02)


def test_h100_is_faster_than_a100_everywhere() -> None:
    m = MODEL_CATALOGUE["qwen3-8b"]
    h, a = make_cost("h100"), make_cost("a100")
    assert h.decode_iteration_s(m, batch=64, context_tokens=50_000) < a.decode_iteration_s(
        m, batch=64, context_tokens=50_000
    )
    assert h.train_s(m, tokens=1e6, num_gpus=8) < a.train_s(m, tokens=1e6, num_gpus=8)


def test_long_sequences_pay_attention_on_top_of_the_parameters() -> None:
    # Qwen2.5-7B: 28 layers x 3584 hidden. One 8192-token sequence, forward: 2 N T = 2 x 7.62e9 x
    # 8192 = 1.248e14 FLOPs from the parameters, 4 x 28 x 3584 x 8192^2 = 2.694e13 from
    # attention: +21.6%. Training counts both three times, so it grows by the same fraction.
    # 8192 sequences of one token have the same tokens and almost no attention.
    m, cost = MODEL_CATALOGUE["qwen2.5-7b"], make_cost("h100")
    long_seq, short_seqs = 8192.0**2, 8192.0
    for charge in (cost.logprob_forward_s, cost.train_s):
        short = charge(m, tokens=8192, num_gpus=1, square_tokens=short_seqs)
        long = charge(m, tokens=8192, num_gpus=1, square_tokens=long_seq)
        assert long / short == pytest.approx(1.216, rel=0.01)


def test_single_sequence_decode_matches_iteration_sum() -> None:
    # One sequence of 100 tokens after a 10-token prompt: the piecewise simulator must equal
    # the plain sum of 100 iterations with context 10, 11, ..., 109.
    cost, model = make_cost(), MODEL_CATALOGUE["qwen2.5-1.5b"]
    out = simulate_worker(cost, model, [SequencePlan(10, (100,), (), 0)])
    expected = sum(cost.decode_iteration_s(model, batch=1, context_tokens=10 + i) for i in range(100))
    assert out.decode_s == pytest.approx(expected, rel=1e-9)
    assert out.tokens_generated == 100 and out.iterations == 100


def test_tool_wait_idles_the_worker() -> None:
    cost, model = make_cost(), MODEL_CATALOGUE["qwen2.5-1.5b"]
    no_tool = simulate_worker(cost, model, [SequencePlan(10, (50, 50), (0.0,), 0)])
    with_tool = simulate_worker(cost, model, [SequencePlan(10, (50, 50), (2.0,), 0)])
    assert with_tool.duration_s == pytest.approx(no_tool.duration_s + 2.0, abs=0.02)


def test_without_a_prefix_cache_each_turn_prefills_the_whole_conversation() -> None:
    # 10 prompt tokens, 50 generated, a tool returns 30, 50 more: with a prefix cache the
    # second turn prefills the tool's 30 tokens, each attending over the 90 of the conversation;
    # without one, all 90 again (attention over 90 x 90).
    cost, model = make_cost(), MODEL_CATALOGUE["qwen2.5-1.5b"]
    plan = SequencePlan(10, (50, 50), (0.5,), 30)
    cached = simulate_worker(cost, model, [plan])
    uncached = simulate_worker(cost, model, [plan], prefix_cache=False)
    prompt_s = cost.prefill_s(model, tokens=10, square_tokens=10 * 10)
    assert cached.prefill_s == pytest.approx(prompt_s + cost.prefill_s(model, tokens=30, square_tokens=30 * 90))
    assert uncached.prefill_s == pytest.approx(prompt_s + cost.prefill_s(model, tokens=90, square_tokens=90 * 90))
    assert uncached.prefill_s > cached.prefill_s
    assert uncached.decode_s == pytest.approx(cached.decode_s)  # the KV it decodes over is the same


def test_a_padded_cache_pays_for_its_longest_row() -> None:
    # Two sequences: prompts of 10 and 90 tokens, 20 tokens each. A paged engine prefills 100
    # tokens and each decode iteration reads the two rows' own contexts; the torch engine's
    # left-padded cache prefills both at 90 and reads 2 x the longer row.
    cpu = make_cost("cpu").device
    paged = RooflineCostModel(replace(cpu, padded_kv_cache=False))
    padded = RooflineCostModel(replace(cpu, padded_kv_cache=True))
    model = MODEL_CATALOGUE["tiny-qwen2-1m"]
    ragged = [SequencePlan(10, (20,), (), 0), SequencePlan(90, (20,), (), 0)]
    a, b = simulate_worker(paged, model, ragged), simulate_worker(padded, model, ragged)
    assert a.prefill_s == pytest.approx(paged.prefill_s(model, tokens=100, square_tokens=10 * 10 + 90 * 90))
    assert b.prefill_s == pytest.approx(paged.prefill_s(model, tokens=180, square_tokens=2 * 90 * 90))
    # 20 iterations: the first at 100 tokens of cache (paged) or 2 x 90 (padded), each later one
    # reading two more.
    first, kv_s = paged.decode_iteration_s(model, batch=2, context_tokens=100), _kv_s(paged, model)
    growth_s = 2 * (19 * 20 / 2) * kv_s
    assert a.decode_s == pytest.approx(20 * first + growth_s)
    assert b.decode_s == pytest.approx(20 * first + 20 * 80 * kv_s + growth_s)
    # Rows of one length pad nothing: both engines cost the same.
    even = [SequencePlan(50, (20,), (), 0)] * 2
    paged_s = simulate_worker(paged, model, even).duration_s
    assert simulate_worker(padded, model, even).duration_s == pytest.approx(paged_s)


def _kv_s(cost: RooflineCostModel, model: ModelSpec) -> float:
    """Seconds of reading one more token of KV cache in a decode iteration."""
    return cost.decode_iteration_s(model, batch=2, context_tokens=1) - cost.decode_iteration_s(
        model, batch=2, context_tokens=0
    )


def test_the_shipped_interference_table_is_what_the_model_writes() -> None:
    # scripts/model_interference.py writes the file from table_rows() and MODELLED_DESCRIPTION;
    # a measured table replaces the file (and its description) without code changes.
    raw = json.loads(TABLE_PATH.read_text())
    if raw["description"].startswith("Modelled"):
        assert raw == {"description": MODELLED_DESCRIPTION, "rows": table_rows()}


def test_sampling_is_deterministic_per_seed_and_step() -> None:
    spec = parse_pipeline_spec(make_spec(workload="math"))
    assert sample_step(spec, 3) == sample_step(spec, 3)
    assert sample_step(spec, 3) != sample_step(spec, 4)


def test_lengths_respect_cap_and_are_heavy_tailed() -> None:
    spec = parse_pipeline_spec(
        make_spec(workload="math", data={"train_batch_size": 256}, rollout={"max_response_length": 8192})
    )
    lengths = [p.response_tokens for p in sample_step(spec, 0)]
    assert max(lengths) <= 8192
    mean = sum(lengths) / len(lengths)
    assert max(lengths) / mean > 4  # a long tail: the longest is several times the mean


def test_more_gpus_make_a_step_faster() -> None:
    cost = make_cost()
    small = simulate_step(cost, parse_pipeline_spec(make_spec(resources={"num_gpus": 2})), 0)
    large = simulate_step(cost, parse_pipeline_spec(make_spec(resources={"num_gpus": 8})), 0)
    assert large.duration_s < small.duration_s


def test_controller_reports_verl_metrics_matching_the_stage_level_step() -> None:
    # Alone on its devices, a sync pipeline's step as run by the controller takes exactly the
    # stage-by-stage time of simulate_step, and its metrics say so under verl's names.
    spec = parse_pipeline_spec(make_spec(trainer={"total_steps": 1}))
    controller = ClusterController(make_cluster(8), make_cost())
    controller.submit("p", spec)
    controller.run_until_idle()
    (event,) = [e for e in controller.events.since(0, 100) if e.kind is EventKind.METRICS]
    metrics = event.data["metrics"]
    for name in ("timing_s/step", "timing_s/gen", "response_length/mean", "perf/throughput", "perf/mfu"):
        assert name in metrics
    result = simulate_step(make_cost(), spec, 0)
    assert metrics["timing_s/step"] == pytest.approx(result.duration_s)
    assert metrics["timing_s/gen"] == pytest.approx(result.gen_s)
    assert metrics["timing_s/step"] == pytest.approx(
        result.gen_s + result.reward_s + result.old_logprob_s + result.ref_logprob_s + result.update_s + result.sync_s
    )
    assert 0 < metrics["perf/mfu"] < 1
