"""Long-tail migration: who hands its tail to whom, and that nothing is lost on the way."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.bench.simulate import POLICIES, prepare, run_policy
from jigsaw_engine.graph.builder import GraphConfig, build_step_graph
from jigsaw_engine.graph.substage import SubStageKind
from jigsaw_engine.graph.tails import Migration, plan_tail_migrations
from jigsaw_engine.spec import parse_pipeline_spec
from jigsaw_engine.workload.decode_sim import WorkerRollout, simulate_worker
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.plans import SequencePlan
from tests.engine.builders import make_cost, make_spec


def _rollout(tail_entry_s: float, end_s: float, remaining: int, tokens_each: int = 100) -> WorkerRollout:
    plan = SequencePlan(tokens_each, (50,), (), 0)
    return WorkerRollout(duration_s=end_s, tail_entry_s=tail_entry_s, tail_remaining=(plan,) * remaining)


def test_a_tail_joins_the_collector_that_ends_first_among_those_with_room() -> None:
    # w0 enters its tail at 10 s (5 sequences, decoding until 100 s) and collects every later
    # tail while its batch has room. With room for 6: w1 (3) and w2 (4) find none and collect
    # themselves; w3 (2) fits beside w1 (3 + 2) and w2 (4 + 2) and takes w1, which ends first.
    # With KV for 1,000 tokens (150 a sequence): w0 holds 750, w1 450; only w3's 300 fits, beside w1.
    rollouts = {0: _rollout(10, 100, 5), 1: _rollout(20, 60, 3), 2: _rollout(30, 150, 4), 3: _rollout(40, 90, 2)}
    everything = [Migration(1, 0, 20), Migration(2, 0, 30), Migration(3, 0, 40)]
    assert plan_tail_migrations(rollouts, max_batch=127, kv_capacity_tokens=10_000) == everything
    assert plan_tail_migrations(rollouts, max_batch=6, kv_capacity_tokens=10_000) == [Migration(3, 1, 40)]
    assert plan_tail_migrations(rollouts, max_batch=127, kv_capacity_tokens=1_000) == [Migration(3, 1, 40)]


def test_moved_sequences_are_re_prefilled_and_finished_in_full() -> None:
    cost = make_cost()
    model = parse_pipeline_spec(make_spec()).model
    own = [SequencePlan(100, (400,), (), 0)] * 4
    moved = (SequencePlan(300, (200,), (), 0),) * 2  # 300 tokens of context to rebuild, 200 to go
    alone = simulate_worker(cost, model, own)
    merged = simulate_worker(cost, model, own, arrivals=((0.5, moved),))
    assert merged.tokens_generated == alone.tokens_generated + 2 * 200  # not one token dropped
    rebuilt_s = cost.prefill_s(model, tokens=600, square_tokens=2 * 300 * 300)
    assert merged.prefill_s == pytest.approx(alone.prefill_s + rebuilt_s)
    assert merged.arrival_tail_marks and merged.duration_s > alone.duration_s


def test_a_migrating_step_keeps_every_token_and_frees_the_source_early() -> None:
    raw = make_spec(mode="async", staleness=1, workload="math", resources={"num_gpus": 4})
    spec = parse_pipeline_spec(
        {**raw, "data": {"train_batch_size": 64}, "rollout": {"n": 4, "max_response_length": 8192}}
    )
    plans = sample_step(spec, 0)
    cost = make_cost()
    plain = build_step_graph(cost, spec, plans, pipeline_id="p", step=0, config=GraphConfig())
    moved = build_step_graph(cost, spec, plans, pipeline_id="p", step=0, config=GraphConfig(migrate_tails=True))
    decode_tokens = [sum(n.tokens for n in g.nodes if n.kind is SubStageKind.DECODE) for g in (plain, moved)]
    assert decode_tokens[0] == decode_tokens[1] == sum(p.response_tokens for p in plans)
    # A target's tail is cut where each source's sequences arrive, with an edge from the source.
    arrivals = {n.node_id: n for n in moved.nodes if ".tail.m" in n.node_id}
    sources = {a.split("/")[1] for a, b in moved.edges if b in arrivals and a.split("/")[1] != b.split("/")[1]}
    assert arrivals and len(sources) == len(arrivals)
    for w in (int(name[1:]) for name in sources):  # a source's devices are free long before
        assert sum(n.duration_s for n in moved.of_worker(w)) < 0.75 * sum(n.duration_s for n in plain.of_worker(w))
    # Sync pipelines never migrate (nothing of theirs could use the freed devices).
    sync = replace(spec, mode=type(spec.mode)("sync"), staleness=0)
    assert build_step_graph(cost, sync, plans, pipeline_id="p", step=0, config=GraphConfig(migrate_tails=True)) == (
        build_step_graph(cost, sync, plans, pipeline_id="p", step=0, config=GraphConfig())
    )


def test_freed_devices_run_other_work_while_the_target_finishes_the_tail() -> None:
    workload = build_mix("M5", variant="areal")
    run = run_policy(POLICIES["jigsaw"], workload.cluster, prepare(workload, steps=3, seed=0))
    spans = run.controller.timeline
    tails: dict[tuple[str, int, int | None], list] = {}
    for s in spans:
        if s.kind == "decode" and s.bucket == "tail":
            tails.setdefault((s.pipeline_id, s.step, s.worker), []).append(s)
    targets = {key: pieces for key, pieces in tails.items() if len(pieces) > 1}  # tails cut by arrivals
    assert targets
    reused = 0
    for (pid, step, worker), pieces in targets.items():
        end = max(p.end_s for p in pieces)
        for other in {s.worker for s in spans if s.pipeline_id == pid and s.step == step} - {worker, None}:
            mine = [s for s in spans if (s.pipeline_id, s.step, s.worker) == (pid, step, other) and s.devices]
            last = max(mine, key=lambda s: s.end_s)
            if last.end_s < end:  # it handed its tail on and left: does anything use its devices meanwhile?
                reused += any(set(o.devices) & set(last.devices) and last.end_s <= o.start_s < end for o in spans)
    assert reused > 0
