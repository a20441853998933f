"""A node of the cluster lost and back, as the controller sees it: the runtime lists the devices
that are gone; pipelines whose open step ran there are handed back, nothing is placed there
while they are gone, and they serve again once back."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jigsaw_engine.contracts import EventKind, PipelineState
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.sched.registry import make_scheduler
from jigsaw_engine.sim.sim_runtime import SimRuntime
from jigsaw_engine.spec.cluster import ClusterSpec
from tests.engine.builders import make_cost, make_spec

STEPS = 6
NODE_1 = {2: "Ray node n1 died", 3: "Ray node n1 died"}


class _Nodes(SimRuntime):
    """A simulated runtime whose nodes can be lost: what a Ray executor reports."""

    def __init__(self, num_devices: int) -> None:
        super().__init__(num_devices)
        self.gone: dict[int, str] = {}

    def lost_devices(self) -> dict[int, str]:
        return dict(self.gone)


def _metrics_steps(controller: ClusterController, pid: str) -> list[int]:
    return [
        e.data["step"]
        for e in controller.events.since(0, 100_000)
        if e.pipeline_id == pid and e.kind is EventKind.METRICS
    ]


def _run_until(controller: ClusterController, done: Callable[[], bool]) -> None:
    while not done():
        t = controller.next_event_time()
        assert t is not None, "ran out of events"
        controller.advance_to(t)


@pytest.mark.parametrize("scheduler", ["jigsaw", "dedicated"])
def test_a_lost_node_hands_back_its_pipelines_and_serves_again_once_back(scheduler: str) -> None:
    cluster = ClusterSpec(num_nodes=2, devices_per_node=2, device_type="h100")
    cost = make_cost()
    runtime = _Nodes(cluster.num_devices)
    controller = ClusterController(cluster, cost, runtime=runtime, scheduler=make_scheduler(scheduler, cluster, cost))
    spec = make_spec(resources={"num_gpus": 2}, trainer={"total_steps": STEPS})
    controller.submit("a", spec)
    controller.submit("b", spec)
    _run_until(controller, lambda: all(len(_metrics_steps(controller, p)) >= 2 for p in ("a", "b")))
    assert any(set(s.devices) & set(NODE_1) for s in controller.timeline)

    runtime.gone = dict(NODE_1)
    lost_at = controller.now_s
    controller.advance_to(lost_at)
    # Those whose open step ran there are handed back (the control plane resumes them), with the
    # cause in their logs; b's home was there. A pipeline that did not touch the node runs on.
    handed_back = [p for p in ("a", "b") if not controller.knows(p)]
    assert "b" in handed_back
    assert all(controller.state_of(p) is PipelineState.RUNNING for p in ("a", "b") if p not in handed_back)
    for pid in handed_back:
        logs = [
            e.data["message"]
            for e in controller.events.since(0, 100_000)
            if e.pipeline_id == pid and e.kind is EventKind.LOG
        ]
        assert any("device(s) " in m and "lost: Ray node n1 died" in m for m in logs), logs
    view = controller.describe()["cluster"]["lost_devices"]
    assert [(d["device"], d["node"], d["reason"]) for d in view] == [(2, 1, NODE_1[2]), (3, 1, NODE_1[3])]
    assert controller.timeline_window(60.0)["lost_devices"] == view

    before = {p: _metrics_steps(controller, p) for p in ("a", "b")}
    for pid in handed_back:  # as the reconciler does: from the last step reported (its checkpoint)
        controller.submit(pid, {**spec, "trainer": {"total_steps": STEPS, "start_step": before[pid][-1]}})
    status = [
        e.data for e in controller.events.since(0, 100_000) if e.pipeline_id == "b" and e.kind is EventKind.STATUS
    ]
    assert status[-1]["status"] == "queued" and "2 of 4 lost with node(s) 1" in status[-1]["reason"]
    # While node 1 is gone nothing runs there, and one pipeline waits: the other holds what remains.
    _run_until(
        controller,
        lambda: sum(len(_metrics_steps(controller, p)) for p in ("a", "b")) >= sum(map(len, before.values())) + 2,
    )
    assert sorted(controller.state_of(p).value for p in ("a", "b")) == ["queued", "running"]
    assert not [s for s in controller.timeline if s.start_s >= lost_at and set(s.devices) & set(NODE_1)]

    runtime.gone = {}
    back_at = controller.now_s
    controller.advance_to(back_at)
    assert controller.describe()["cluster"]["lost_devices"] == []
    assert all(controller.state_of(p) is not PipelineState.QUEUED for p in ("a", "b"))  # placed on the node back
    controller.run_until_idle()
    for pid in ("a", "b"):
        assert controller.state_of(pid) is PipelineState.SUCCEEDED
        assert _metrics_steps(controller, pid) == list(range(1, STEPS + 1))  # every step once
    assert any(s.start_s >= back_at and set(s.devices) & set(NODE_1) for s in controller.timeline)


def test_a_pipeline_that_did_not_use_the_lost_node_runs_on() -> None:
    cluster = ClusterSpec(num_nodes=2, devices_per_node=2, device_type="h100")
    cost = make_cost()
    runtime = _Nodes(cluster.num_devices)
    controller = ClusterController(cluster, cost, runtime=runtime, scheduler=make_scheduler("dedicated", cluster, cost))
    controller.submit("a", make_spec(resources={"num_gpus": 2}, trainer={"total_steps": STEPS}))
    _run_until(controller, lambda: len(_metrics_steps(controller, "a")) >= 1)
    runtime.gone = dict(NODE_1)
    controller.run_until_idle()
    assert controller.state_of("a") is PipelineState.SUCCEEDED
    assert _metrics_steps(controller, "a") == list(range(1, STEPS + 1))
    assert {d for s in controller.timeline if s.pipeline_id == "a" for d in s.devices} == {0, 1}
