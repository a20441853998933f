"""Pause at a step boundary and resume from it, and the device time each pipeline is billed."""

from __future__ import annotations

import math

import pytest

from jigsaw_engine.contracts import EventKind, PipelineState
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.local_engine import LocalEngine
from tests.engine.builders import make_cluster, make_cost, make_spec


def metric_steps(c: ClusterController, pid: str) -> list[int]:
    return [e.data["step"] for e in c.events.since(0, 100_000) if e.pipeline_id == pid and e.kind is EventKind.METRICS]


def billed_device_s(c: ClusterController, pid: str) -> float:
    total = 0.0
    for e in c.events.since(0, 100_000):
        if e.pipeline_id != pid:
            continue
        if e.kind is EventKind.METRICS:
            total += e.data["metrics"]["usage/device_seconds"]
        elif e.kind is EventKind.STATUS:
            total += e.data.get("device_seconds", 0.0)
    return total


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_pause_stops_at_a_step_boundary_and_resume_loses_and_repeats_no_step(mode: str) -> None:
    c = ClusterController(make_cluster(4), make_cost())
    c.submit("p", make_spec(trainer={"total_steps": 6}, mode=mode, resources={"num_gpus": 4}))
    while len(metric_steps(c, "p")) < 2:
        c.advance_to(c.next_event_time() or math.inf)
    assert c.pause("p") is True
    c.run_until_idle()
    assert c.state_of("p") is PipelineState.PAUSED
    paused_at = len(metric_steps(c, "p"))
    assert paused_at >= 2
    assert c.describe()["cluster"]["devices_in_use"] == 0  # a paused pipeline holds nothing
    assert c.pause("p") is False

    assert c.resume("p") is True
    c.run_until_idle()
    assert c.state_of("p") is PipelineState.SUCCEEDED
    assert metric_steps(c, "p") == [1, 2, 3, 4, 5, 6]


def test_a_queued_pipeline_pauses_at_once_and_frees_its_place() -> None:
    c = ClusterController(make_cluster(2), make_cost())
    c.submit("a", make_spec(resources={"num_gpus": 2}))
    c.submit("b", make_spec(resources={"num_gpus": 2}))
    assert c.pause("b") is True and c.state_of("b") is PipelineState.PAUSED
    c.run_until_idle()
    assert c.state_of("a") is PipelineState.SUCCEEDED and c.state_of("b") is PipelineState.PAUSED
    assert metric_steps(c, "b") == []


def test_usage_splits_shared_devices_by_share_and_sums_to_the_timeline() -> None:
    c = ClusterController(make_cluster(8), make_cost())
    c.submit("a", make_spec(trainer={"total_steps": 3}, resources={"num_gpus": 4}))
    c.submit("b", make_spec(trainer={"total_steps": 3}, resources={"num_gpus": 4}, seed=3))
    c.run_until_idle()
    for pid in ("a", "b"):
        spans = [s for s in c.timeline if s.pipeline_id == pid]
        expected = sum(len(s.devices) * (s.end_s - s.start_s) * s.share for s in spans)
        assert billed_device_s(c, pid) == pytest.approx(expected)
        assert expected > 0
    # Nobody is billed for more device time than the cluster had.
    assert billed_device_s(c, "a") + billed_device_s(c, "b") <= 8 * c.now_s + 1e-6


def test_local_engine_resumes_a_paused_pipeline_when_it_is_submitted_again() -> None:
    engine = LocalEngine(make_cluster(4), speed=1.0)
    try:
        engine.submit("a", make_spec(resources={"num_gpus": 4}))
        spec = make_spec(resources={"num_gpus": 4}, seed=1)
        engine.submit("p", spec)  # waits behind "a"
        assert engine.pause("p") is True
        assert engine.pause("unknown") is False

        def statuses() -> list[str]:
            events = engine.events_since(0, 10_000).events
            return [e.data["status"] for e in events if e.pipeline_id == "p" and e.kind is EventKind.STATUS]

        assert statuses() == ["queued", "paused"]
        engine.cancel("a")
        engine.submit("p", spec)  # resume
        engine.submit("p", spec)  # a duplicate dispatch changes nothing
        assert statuses() == ["queued", "paused", "queued", "starting"]
    finally:
        engine.close()
