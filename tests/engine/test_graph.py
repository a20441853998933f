"""The sub-stage graph: structure, agreement with the step simulator, async edges, prediction."""

from __future__ import annotations

import pytest

from jigsaw_engine.graph.builder import GraphConfig, build_step_graph
from jigsaw_engine.graph.predict import GraphPredictor, role_of
from jigsaw_engine.graph.substage import ResourceClass, SubStageKind
from jigsaw_engine.sim.step_sim import simulate_step
from jigsaw_engine.spec import parse_pipeline_spec
from jigsaw_engine.workload.decode_sim import DecodeBuckets, simulate_worker
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.plans import SequencePlan
from tests.engine.builders import make_cost, make_spec


def graph_for(**overrides):  # type: ignore[no-untyped-def]
    spec = parse_pipeline_spec(make_spec(**overrides))
    return spec, build_step_graph(make_cost(), spec, sample_step(spec, 0), pipeline_id="p", step=0)


def test_grpo_graph_has_every_sub_stage_in_order() -> None:
    _, g = graph_for(resources={"num_gpus": 4, "tp": 2})  # 2 rollout workers
    kinds = [n.kind for n in g.nodes if n.worker is None]
    assert kinds == [SubStageKind.REWARD, SubStageKind.OLD_LOGPROB, SubStageKind.REF_LOGPROB] + [
        SubStageKind.TRAIN
    ] * 4 + [SubStageKind.WEIGHT_SYNC]
    assert {n.worker for n in g.nodes if n.worker is not None} == {0, 1}
    assert all(n.devices == 2 for n in g.of_kind(SubStageKind.DECODE))  # a worker spans tp devices
    assert all(n.devices == 4 for n in g.of_kind(SubStageKind.TRAIN))
    # Every worker's last rollout node feeds the reward; the reward feeds the log-probs.
    assert len(g.predecessors("s0/reward")) == 2
    assert g.predecessors("s0/old_logprob") == ["s0/reward"]
    assert g.enables_rollout_of_step == 1


def test_rloo_has_no_reference_forward_and_async_links_further_ahead() -> None:
    _, g = graph_for(algorithm="rloo", mode="async", staleness=2)
    assert list(g.of_kind(SubStageKind.REF_LOGPROB)) == []
    assert g.enables_rollout_of_step == 3  # step 0's weights are needed by step 0 + 2 + 1


def test_graph_durations_add_up_to_the_step_simulator() -> None:
    # Stage by stage on dedicated devices, the step takes the slowest worker's chain and then
    # every pipeline-wide sub-stage: the graph's critical path.
    spec, g = graph_for(workload="search", resources={"num_gpus": 4})
    step = simulate_step(make_cost(), spec, 0)
    assert g.critical_path_s() == pytest.approx(step.duration_s)


def test_decode_buckets_split_by_tokens_per_iteration() -> None:
    # 200 sequences of 10 tokens then one of 300: 10 iterations at 201 tokens (medium),
    # then 290 iterations at 1 token (tail), with buckets dense >= 1024 and tail < 128.
    plans = [SequencePlan(4, (10,), (), 0)] * 200 + [SequencePlan(4, (300,), (), 0)]
    cost = make_cost()
    from jigsaw_engine.spec import MODEL_CATALOGUE

    out = simulate_worker(cost, MODEL_CATALOGUE["qwen2.5-1.5b"], plans, buckets=DecodeBuckets())
    assert out.bucket_tokens == {"dense": 0, "medium": 201 * 10, "tail": 290}
    assert out.bucket_s["medium"] + out.bucket_s["tail"] == pytest.approx(out.decode_s)


def test_tail_decode_is_memory_bound_and_tool_waits_use_no_device() -> None:
    _, g = graph_for(workload="search", data={"train_batch_size": 8})
    classes = {n.bucket: n.resource for n in g.of_kind(SubStageKind.DECODE)}
    assert classes.get("tail") is ResourceClass.MEMORY
    tools = list(g.of_kind(SubStageKind.TOOL))
    assert tools and all(n.devices == 0 and n.resource is ResourceClass.HOST for n in tools)


def test_config_changes_minibatches_and_thresholds() -> None:
    spec = parse_pipeline_spec(make_spec())
    cfg = GraphConfig(buckets=DecodeBuckets(dense_min_tokens=4, tail_max_tokens=2), train_minibatches=2)
    g = build_step_graph(make_cost(), spec, sample_step(spec, 0), pipeline_id="p", step=0, config=cfg)
    assert len(list(g.of_kind(SubStageKind.TRAIN))) == 2
    assert any(n.bucket == "dense" for n in g.of_kind(SubStageKind.DECODE))


def test_prediction_follows_drift_and_recovers_from_a_surprise() -> None:
    cost = make_cost()
    spec = parse_pipeline_spec(make_spec())
    graphs = [build_step_graph(cost, spec, sample_step(spec, s), pipeline_id="p", step=s) for s in range(6)]
    predictor = GraphPredictor()
    for g in graphs[:3]:
        predictor.observe(g)
    steady = max(predictor.last_errors.values())
    assert steady < 0.5  # same workload: predictions within sampling noise

    # A surprise: every duration of the next step triples (lengths jumped). The first
    # prediction is badly wrong; after observing it once, the next one is close again.
    from dataclasses import replace

    surprise = [replace(g, nodes=tuple(replace(n, duration_s=3 * n.duration_s) for n in g.nodes)) for g in graphs[3:]]
    predictor.observe(surprise[0])
    assert max(predictor.last_errors.values()) > 0.5
    predictor.observe(surprise[1])
    assert max(predictor.last_errors.values()) < 0.5
    predicted = predictor.predict(graphs[5])
    worst = max(
        abs(p.duration_s - s.duration_s) / s.duration_s
        for p, s in zip(predicted.nodes, surprise[2].nodes, strict=True)
        if s.duration_s > 0
    )
    assert worst < 0.5
    assert role_of(predicted.nodes[0]) == role_of(graphs[5].nodes[0])
