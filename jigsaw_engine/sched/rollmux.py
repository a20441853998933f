"""RollMux: phase-level multiplexing of several jobs on disaggregated pools.

Jobs are placed in co-execution groups. A group's devices are split into a rollout pool and a
training pool shared by all its jobs: while one job trains on the training pool, another job
generates on the rollout pool, so each job's dependency bubble is filled by another job's
active phase. Within a group phases run first come, first served on their pool, which for jobs
that alternate rollout and training is the round-robin schedule. A job's model state stays
cached in host memory; running a phase on devices that last held another job costs a warm
context switch (:meth:`RooflineCostModel.context_switch_s`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.graph.substage import SubStageKind
from jigsaw_engine.sched.protocol import ClusterView
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.tasks import Task


@dataclass(frozen=True, slots=True)
class CoExecutionGroup:
    members: tuple[str, ...]
    devices: tuple[int, ...]
    rollout_gpus: int
    """The first ``rollout_gpus`` devices generate; the rest train."""


class RollMuxScheduler:
    name = "rollmux"

    def __init__(self, groups: list[CoExecutionGroup], cost: RooflineCostModel) -> None:
        self._group_of = {pid: g for g in groups for pid in g.members}
        self._cost = cost
        self._resident: dict[int, str] = {}
        """Whose state each device holds now."""

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        return [pid for pid in view.queued if pid in self._group_of]

    def decide(self, view: ClusterView) -> list[Task]:
        claimed: set[int] = set()
        tasks: list[Task] = []
        for stage in view.ready:
            pid, node = stage.pipeline_id, stage.node
            group = self._group_of[pid]
            if node.devices == 0:
                tasks.append(Task(pid, node, ()))
                continue
            if node.worker is not None:
                lo = node.worker * node.devices
                devices = group.devices[lo : lo + node.devices]
            else:
                devices = group.devices[group.rollout_gpus :]
            if any(d in claimed or not view.is_free(d) for d in devices):
                continue
            claimed.update(devices)
            tasks.append(Task(pid, node, devices, setup_s=self._switch_s(pid, view.specs[pid], devices, node.kind)))
        return tasks

    def release(self, pipeline_id: str) -> None:
        self._resident = {d: p for d, p in self._resident.items() if p != pipeline_id}

    def _switch_s(self, pid: str, spec: PipelineSpec, devices: tuple[int, ...], kind: SubStageKind) -> float:
        cold = any(self._resident.get(d) != pid for d in devices)
        for d in devices:
            self._resident[d] = pid
        if not cold:
            return 0.0
        training = kind is not SubStageKind.PREFILL and kind is not SubStageKind.DECODE
        return self._cost.context_switch_s(spec.model, num_gpus=len(devices), training=training)
