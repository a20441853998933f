"""Early log-prob forwards: a sync worker that finishes before the last one forwards its own
sequences on its own devices, and the step's pipeline-wide forwards shrink to the rest."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.bench.simulate import POLICIES, prepare, run_policy
from jigsaw_engine.graph.builder import GraphConfig, build_step_graph, split_by_worker
from jigsaw_engine.graph.substage import SubStageKind
from jigsaw_engine.spec import parse_pipeline_spec
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.plans import SequencePlan
from tests.engine.builders import make_cost, make_spec

FORWARDS = (SubStageKind.OLD_LOGPROB, SubStageKind.REF_LOGPROB)
EARLY = GraphConfig(early_logprobs=True)


def _long_tailed_sync_spec():  # type: ignore[no-untyped-def]
    raw = make_spec(workload="math", resources={"num_gpus": 4})  # 4 workers of 1 device
    return parse_pipeline_spec(
        {**raw, "data": {"train_batch_size": 64}, "rollout": {"n": 4, "max_response_length": 8192}}
    )


def test_a_worker_done_early_forwards_its_sequences_on_its_devices_and_the_step_ends_sooner() -> None:
    spec, cost = _long_tailed_sync_spec(), make_cost()
    plans = sample_step(spec, 0)
    plain = build_step_graph(cost, spec, plans, pipeline_id="p", step=0)
    early = build_step_graph(cost, spec, plans, pipeline_id="p", step=0, config=EARLY)
    rollout_end = {w: sum(n.duration_s for n in plain.of_worker(w)) for w in range(4)}
    last = max(rollout_end, key=rollout_end.__getitem__)
    forwarded = {n.worker for n in early.nodes if n.kind in FORWARDS and n.worker is not None}
    assert forwarded and last not in forwarded
    for w in forwarded:
        own = [n for n in early.of_worker(w) if n.kind in FORWARDS]
        assert [n.kind for n in own] == list(FORWARDS)  # after its rollout, on its own tp devices
        assert early.of_worker(w)[: -len(own)] == plain.of_worker(w)
        assert all(n.devices == spec.resources.tp for n in own)
        # It ends before the last worker's rollout does: it costs the step nothing.
        assert rollout_end[w] + sum(n.duration_s for n in own) <= rollout_end[last]
    # Each sequence is forwarded once: on its worker, or by the step's forwards over the rest.
    per_worker = split_by_worker(spec, plans)
    early_tokens = sum(n.tokens for n in early.of_kind(SubStageKind.OLD_LOGPROB) if n.worker is not None)
    assert early_tokens == sum(p.total_tokens for w in forwarded for p in per_worker[w])
    rest = [p for w in range(4) if w not in forwarded for p in per_worker[w]]
    wide = next(n for n in early.pipeline_wide() if n.kind is SubStageKind.OLD_LOGPROB)
    assert wide.duration_s == pytest.approx(
        cost.logprob_forward_s(
            spec.model,
            tokens=sum(p.total_tokens for p in rest),
            num_gpus=spec.resources.train_gpus,
            square_tokens=sum(p.total_tokens**2 for p in rest),
        )
        + cost.device.stage_overhead_s
    )
    # Rollout and training are untouched (same tokens, same update); the step ends sooner.
    others = [[n for n in g.nodes if n.kind not in FORWARDS] for g in (plain, early)]
    assert others[0] == others[1]
    assert early.critical_path_s() < plain.critical_path_s()


def test_no_early_forward_when_it_would_end_after_the_last_worker_or_the_pipeline_is_async() -> None:
    spec, cost = _long_tailed_sync_spec(), make_cost()
    # Every worker gets the same sequences and finishes at the same moment: a worker's own
    # forwards would then end after the last rollout, holding its training back.
    even = [SequencePlan(200, (600,), (), 0)] * 64
    assert build_step_graph(cost, spec, even, pipeline_id="p", step=0, config=EARLY) == build_step_graph(
        cost, spec, even, pipeline_id="p", step=0
    )
    # An async pipeline's training is not its rollout's: the forwards stay pipeline-wide.
    spread = sample_step(spec, 0)
    async_spec = replace(spec, mode=type(spec.mode)("async"), staleness=1)
    assert build_step_graph(cost, async_spec, spread, pipeline_id="p", step=0, config=EARLY) == (
        build_step_graph(cost, async_spec, spread, pipeline_id="p", step=0)
    )


def test_jigsaw_runs_a_workers_forwards_where_its_rollout_just_ended() -> None:
    workload = build_mix("M2")
    run = run_policy(POLICIES["jigsaw"], workload.cluster, prepare(workload, steps=3, seed=0))
    spans = run.controller.timeline
    early = [s for s in spans if s.kind in ("old_logprob", "ref_logprob") and s.worker is not None]
    assert early
    for s in early:
        decodes = [
            d
            for d in spans
            if d.kind == "decode" and (d.pipeline_id, d.step, d.worker) == (s.pipeline_id, s.step, s.worker)
        ]
        last = max(decodes, key=lambda d: d.end_s)
        assert set(s.devices) <= set(last.devices) and s.start_s >= last.end_s - 1e-9
