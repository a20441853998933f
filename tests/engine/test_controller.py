"""The controller on a virtual clock: lifecycle, placement, cancel, determinism, cursors."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest

from jigsaw_engine.contracts import EventKind, PipelineState
from jigsaw_engine.control.cluster_controller import MAX_WORKER_LOSSES, ClusterController
from jigsaw_engine.control.local_engine import LocalEngine
from jigsaw_engine.errors import DuplicatePipelineError, SpecError
from jigsaw_engine.graph.substage import SubStageKind
from jigsaw_engine.sim.sim_runtime import SimRuntime
from jigsaw_engine.tasks import TaskFinished
from tests.engine.builders import make_cluster, make_cost, make_spec


def statuses(controller: ClusterController, pipeline_id: str) -> list[str]:
    return [
        e.data["status"]
        for e in controller.events.since(0, 10_000)
        if e.pipeline_id == pipeline_id and e.kind is EventKind.STATUS
    ]


def test_pipeline_runs_to_success_with_metrics_each_step() -> None:
    c = ClusterController(make_cluster(8), make_cost())
    c.submit("p", make_spec(trainer={"total_steps": 3}))
    c.run_until_idle()
    assert statuses(c, "p") == ["queued", "starting", "running", "succeeded"]
    steps = [e.data["step"] for e in c.events.since(0, 100) if e.kind is EventKind.METRICS]
    assert steps == [1, 2, 3]
    assert c.describe()["cluster"]["devices_in_use"] == 0


def test_second_pipeline_waits_for_devices_then_runs() -> None:
    # 4 devices: A takes 4, so B (2 devices) queues until A has finished.
    c = ClusterController(make_cluster(4), make_cost())
    c.submit("a", make_spec(resources={"num_gpus": 4}))
    c.submit("b", make_spec(resources={"num_gpus": 2}))
    assert c.state_of("b") is PipelineState.QUEUED
    c.run_until_idle()
    events = c.events.since(0, 10_000)
    a_done = next(e.seq for e in events if e.pipeline_id == "a" and e.data.get("status") == "succeeded")
    b_start = next(e.seq for e in events if e.pipeline_id == "b" and e.data.get("status") == "starting")
    assert b_start > a_done
    assert c.state_of("b") is PipelineState.SUCCEEDED


def test_cancel_frees_devices_and_stops_metrics() -> None:
    c = ClusterController(make_cluster(2), make_cost())
    c.submit("a", make_spec(trainer={"total_steps": 50}))
    c.submit("b", make_spec())
    c.advance_to(100.0)
    assert c.cancel("a") is True
    assert c.cancel("a") is False  # already ended
    seen = len(c.events.since(0, 10_000))
    c.run_until_idle()
    later = c.events.since(0, 10_000)[seen:]
    assert all(e.pipeline_id == "b" for e in later)  # nothing more from the cancelled one
    assert c.state_of("a") is PipelineState.CANCELLED and c.state_of("b") is PipelineState.SUCCEEDED


def test_invalid_and_duplicate_submissions_are_refused() -> None:
    c = ClusterController(make_cluster(8), make_cost())
    with pytest.raises(SpecError):
        c.submit("x", make_spec(rollout={"n": 0}))
    with pytest.raises(SpecError):
        c.submit("y", make_spec(resources={"num_gpus": 16}))
    c.submit("z", make_spec())
    with pytest.raises(DuplicatePipelineError):
        c.submit("z", make_spec())


def test_same_inputs_give_identical_event_streams() -> None:
    def run() -> list[tuple]:
        c = ClusterController(make_cluster(4), make_cost())
        c.submit("a", make_spec(workload="math"))
        c.submit("b", make_spec(workload="search"))
        c.run_until_idle()
        return [(e.seq, e.pipeline_id, e.kind, e.sim_time_s, e.data) for e in c.events.since(0, 10_000)]

    assert run() == run()


def test_event_cursor_reads_each_event_once() -> None:
    c = ClusterController(make_cluster(8), make_cost())
    c.submit("p", make_spec())
    c.run_until_idle()
    first = c.events.since(0, 3)
    rest = c.events.since(first[-1].seq, 10_000)
    everything = c.events.since(0, 10_000)
    assert [e.seq for e in first + rest] == [e.seq for e in everything]
    assert [e.seq for e in everything] == list(range(1, len(everything) + 1))


def test_local_engine_paces_against_wall_clock() -> None:
    # At 1000 simulated seconds per wall second, a job whose last event is at simulated time T
    # cannot finish in less than T / 1000 wall seconds (pacing), and must finish at all.
    started = time.monotonic()  # before the engine: its clock starts when it is built
    engine = LocalEngine(make_cluster(8), speed=1000.0)
    try:
        engine.submit("p", make_spec())
        engine.submit("p", make_spec())  # idempotent
        deadline = started + 20
        done = None
        while time.monotonic() < deadline and done is None:
            done = next((e for e in engine.events_since(0).events if e.data.get("status") == "succeeded"), None)
            time.sleep(0.005)
        assert done is not None, "the job never finished"
        elapsed_s = time.monotonic() - started
        assert elapsed_s >= done.sim_time_s / 1000.0 * 0.95, (elapsed_s, done.sim_time_s)
        kinds = [e.data.get("status") for e in engine.events_since(0).events if e.kind is EventKind.STATUS]
        assert kinds == ["queued", "starting", "running", "succeeded"]
        assert engine.describe()["pipelines"] == {"succeeded": 1}
    finally:
        engine.close()


def test_local_engine_rejects_non_positive_speed() -> None:
    with pytest.raises(ValueError, match="speed must be > 0"):
        LocalEngine(make_cluster(8), speed=0)
    LocalEngine(make_cluster(8), speed=math.inf).close()


class _WorkerDiesUnderDecode(SimRuntime):
    """A runtime whose worker process dies under every decode sub-stage of ``victim``: what
    the real runtime reports when a job's actor is killed mid-generation."""

    def __init__(self, num_devices: int, victim: str) -> None:
        super().__init__(num_devices)
        self.victim = victim

    def advance_to(self, time_s: float) -> list[TaskFinished]:
        return [
            replace(f, error="the worker process died", lost=True)
            if f.task.pipeline_id == self.victim and f.task.node.kind is SubStageKind.DECODE
            else f
            for f in super().advance_to(time_s)
        ]


def test_a_lost_worker_hands_the_pipeline_back_and_a_worker_that_keeps_dying_fails_it() -> None:
    cluster = make_cluster(4)
    controller = ClusterController(cluster, make_cost(), runtime=_WorkerDiesUnderDecode(4, victim="doomed"))
    controller.submit("doomed", make_spec(resources={"num_gpus": 2}))
    controller.submit("other", make_spec(resources={"num_gpus": 2}))
    for attempt in range(1, MAX_WORKER_LOSSES + 1):
        controller.run_until_idle()
        # Handed back, not failed: the engine forgets it (as a restart would) and says why;
        # its devices go on serving the other pipeline.
        assert not controller.knows("doomed")
        lost = [e for e in controller.events.since(0, 10_000) if e.pipeline_id == "doomed" and e.kind is EventKind.LOG]
        assert len(lost) == attempt and "worker lost" in lost[-1].data["message"]
        assert "failed" not in statuses(controller, "doomed")
        controller.submit("doomed", make_spec(resources={"num_gpus": 2}))  # the control plane resubmits
    controller.run_until_idle()
    assert controller.state_of("doomed") is PipelineState.FAILED
    assert controller.state_of("other") is PipelineState.SUCCEEDED
