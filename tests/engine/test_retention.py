"""A long-running engine keeps only the recent past: spans, finished steps, read events and ended
runs older than ``retain_ended_s`` go; queued, running and paused runs, and the recent past, stay."""

from __future__ import annotations

import math

import pytest

from jigsaw_engine.contracts import EventKind, PipelineState
from jigsaw_engine.control.cluster_controller import PRUNES_PER_RETENTION, ClusterController
from jigsaw_engine.control.event_log import EventLog
from jigsaw_engine.control.local_engine import ENDED_RUN_KEPT_WALL_S, TIMELINE_KEPT_S, LocalEngine, retention_s
from jigsaw_engine.sched.jigsaw import JigsawScheduler
from tests.engine.builders import make_cluster, make_cost, make_spec

RETAIN_S = 300.0
SHORT = make_spec(trainer={"total_steps": 1}, data={"train_batch_size": 4}, rollout={"n": 2})


def store_events(c: ClusterController) -> None:
    """What the control plane's pump does: read from its cursor until nothing is left."""
    cursor = c.events.read_through
    while batch := c.events.since(cursor, 500):
        cursor = batch[-1].seq


def run_for(c: ClusterController, seconds: float) -> None:
    c.advance_to(c.now_s + seconds)


def test_ended_runs_and_old_spans_go_past_the_retention_live_and_recent_ones_stay() -> None:
    c = ClusterController(make_cluster(8), make_cost(), retain_ended_s=RETAIN_S)
    c.submit("done", SHORT)
    c.submit("cancelled", make_spec(trainer={"total_steps": 1000}))
    run_for(c, 5.0)
    c.cancel("cancelled")
    while c.state_of("done") is not PipelineState.SUCCEEDED:
        c.advance_to(c.next_event_time() or math.inf)
    c.submit("running", make_spec(trainer={"total_steps": 1000}, resources={"num_gpus": 4}))
    c.submit("paused", make_spec(trainer={"total_steps": 1000}, resources={"num_gpus": 4}))
    c.submit("queued", make_spec(trainer={"total_steps": 1000}, resources={"num_gpus": 8}))
    run_for(c, 60.0)
    c.pause("paused")
    while c.state_of("paused") is not PipelineState.PAUSED:
        c.advance_to(c.next_event_time() or math.inf)
    store_events(c)

    run_for(c, RETAIN_S / 2)  # ended, but recently: still known
    assert c.knows("done") and c.knows("cancelled")
    assert any(s.pipeline_id == "done" for s in c.timeline)

    run_for(c, RETAIN_S)
    store_events(c)
    run_for(c, 2 * RETAIN_S / PRUNES_PER_RETENTION)  # the next prune is due
    assert not c.knows("done") and not c.knows("cancelled")
    assert c.pipeline_states() == {"running": "running", "paused": "paused", "queued": "queued"}
    assert c.describe()["pipelines"] == {"succeeded": 1, "cancelled": 1, "running": 1, "paused": 1, "queued": 1}
    kept_from = c.now_s - RETAIN_S * (1 + 1 / PRUNES_PER_RETENTION)
    assert c.timeline and all(s.end_s >= kept_from for s in c.timeline)
    assert all(s.end_s >= kept_from for s in c.finished_steps)
    assert not any(s.pipeline_id == "done" for s in c.timeline)
    assert not any(e.pipeline_id in ("done", "cancelled") for e in c.events.since(0, 100_000))
    # The recent past is all there: the cluster page's window of it is what it was.
    recent = [s for s in c.timeline if s.end_s >= c.now_s - RETAIN_S]
    window = [s for s in c.timeline_window(RETAIN_S)["spans"] if not s["running"]]
    assert recent and len(window) == len(recent)


def test_an_ended_run_is_forgotten_only_once_its_last_event_is_stored() -> None:
    c = ClusterController(make_cluster(8), make_cost(), retain_ended_s=RETAIN_S)
    c.submit("done", SHORT)
    c.run_until_idle()
    end_seq = c.events.last_seq
    c.submit("later", make_spec(trainer={"total_steps": 1000}))
    run_for(c, 10 * RETAIN_S)
    assert c.knows("done")  # nobody has read its end: whoever submitted it does not know yet
    assert c.events.since(0, 100_000)[0].seq == 1  # and unread events stay
    c.events.since(end_seq - 1, 1)  # the reader stored everything before its last event
    run_for(c, RETAIN_S)
    assert c.knows("done")
    c.events.since(end_seq, 1)
    run_for(c, RETAIN_S)
    assert not c.knows("done")


def test_worker_losses_of_a_forgotten_run_go_with_it() -> None:
    c = ClusterController(make_cluster(8), make_cost(), retain_ended_s=0.0)
    c.submit("p", SHORT)
    c._worker_losses["p"] = 1  # as if its worker had died once and it was resubmitted
    c.run_until_idle()
    store_events(c)
    run_for(c, 1.0)
    assert not c.knows("p") and "p" not in c._worker_losses


def retained_after(jobs: int, retain_ended_s: float | None) -> tuple[int, int, int, int]:
    """``jobs`` short jobs, one every 10 engine seconds, read like the service reads them."""
    c = ClusterController(make_cluster(8), make_cost(), retain_ended_s=retain_ended_s)
    for i in range(jobs):
        c.submit(f"p{i}", SHORT)
        run_for(c, 10.0)
        store_events(c)
    return len(c.timeline), len(c.pipeline_states()), len(c.finished_steps), len(c.events)


def test_a_long_run_keeps_bounded_state_with_retention_and_everything_without() -> None:
    spans, runs, steps, events = retained_after(200, retain_ended_s=100.0)
    everything = retained_after(200, retain_ended_s=None)
    # About 100 / 10 jobs' worth is kept, whatever the number of jobs (five events a job).
    assert runs <= 12 and steps <= 12 and events <= 12 * 5
    assert spans <= everything[0] * 12 // 200
    assert everything[1:] == (200, 200, 1000)


def test_event_log_forgets_only_what_was_read() -> None:
    log = EventLog(max_events=100)
    for t in range(10):
        log.append("p", EventKind.LOG, float(t), {})
    assert log.forget_read_before(100.0) == 0
    log.since(4, 100)
    assert log.forget_read_before(2.0) == 2  # older than 2 s and read
    assert log.forget_read_before(100.0) == 2  # the rest read: seq 3 and 4
    assert [e.seq for e in log.since(0, 100)] == [5, 6, 7, 8, 9, 10]
    log.since(999, 1)  # a stale cursor (an engine restarted) counts only up to what exists
    assert log.read_through == 10


def test_the_service_engine_keeps_an_hour_of_engine_time_and_minutes_of_wall_time() -> None:
    assert retention_s(20.0) == TIMELINE_KEPT_S
    assert retention_s(600.0) == ENDED_RUN_KEPT_WALL_S * 600.0
    assert retention_s(math.inf) == TIMELINE_KEPT_S
    engine = LocalEngine(make_cluster(8), speed=100.0)
    try:
        assert engine._controller._retain_ended_s == retention_s(100.0)
    finally:
        engine.close()


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_a_negative_retention_is_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        ClusterController(make_cluster(8), make_cost(), retain_ended_s=bad)


def test_the_jigsaw_scheduler_holds_nothing_of_the_pipelines_that_ended() -> None:
    """The service's scheduler lives as long as the engine: what it keeps per pipeline must go
    with the pipeline, or a long-lived engine grows with every job it ever ran."""
    cluster, cost = make_cluster(8), make_cost()
    scheduler = JigsawScheduler(cluster, cost)
    c = ClusterController(cluster, cost, scheduler=scheduler)
    for i in range(20):
        c.submit(f"p{i}", SHORT)
        run_for(c, 10.0)
    c.submit("live", make_spec(trainer={"total_steps": 1000}))
    run_for(c, 30.0)
    assert c.state_of("p19") is PipelineState.SUCCEEDED and c.state_of("live") is PipelineState.RUNNING

    def pipelines_in(value: object) -> set[str]:
        keys = value.keys() if isinstance(value, dict) else value if isinstance(value, set) else ()
        return {k[0] if isinstance(k, tuple) else k for k in keys if isinstance(k, (str, tuple))}

    mechanisms = (scheduler.homes, scheduler.placement, scheduler.turns, scheduler.split)
    held = set().union(*(pipelines_in(v) for m in mechanisms for v in vars(m).values()))
    held |= set().union(*(pipelines_in(v) for v in scheduler.placement.resident.values()))
    assert held == {"live"}
