"""Each pipeline on a dedicated partition of its own devices.

Colocated (verl): rollout and training share the partition and alternate strictly (the
graph's edges make training wait for the whole rollout). Disaggregated (``rollout_gpus`` set,
StreamRL): the first ``rollout_gpus`` devices of the partition generate, the rest train.
Admission is first come, first served, and no pipeline overtakes an earlier one. With every
pipeline asking for the whole cluster the same policy runs them one after another: verl's
other deployment, "serial on the whole cluster".
"""

from __future__ import annotations

from collections.abc import Mapping

from jigsaw_engine.graph.substage import SubStageKind
from jigsaw_engine.runtime.protocol import Task
from jigsaw_engine.sched.protocol import ClusterView
from jigsaw_engine.spec.pipeline import PipelineSpec


class DedicatedScheduler:
    name = "dedicated"

    def __init__(self) -> None:
        self._partitions: dict[str, tuple[int, ...]] = {}

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        taken = {d for part in self._partitions.values() for d in part}
        admitted: list[str] = []
        for pid in view.queued:
            need = specs[pid].resources.num_gpus
            free = [d for d in range(view.num_devices) if d not in taken]
            if need > len(free):
                break  # strict arrival order
            self._partitions[pid] = tuple(free[:need])
            taken.update(free[:need])
            admitted.append(pid)
        return admitted

    def decide(self, view: ClusterView) -> list[Task]:
        claimed: set[int] = set()
        tasks: list[Task] = []
        for stage in view.ready:
            part = self._partitions[stage.pipeline_id]
            node = stage.node
            resources = view.specs[stage.pipeline_id].resources
            if node.devices == 0:
                devices: tuple[int, ...] = ()
            elif node.worker is not None:
                devices = part[node.worker * node.devices : (node.worker + 1) * node.devices]
            elif node.kind is SubStageKind.LOAD or resources.rollout_gpus is None:
                devices = part
            else:
                devices = part[resources.rollout_gpus :]  # the trainer's own devices
            if any(d in claimed or not view.is_free(d) for d in devices):
                continue
            claimed.update(devices)
            tasks.append(Task(stage.pipeline_id, node, devices))
        return tasks

    def release(self, pipeline_id: str) -> None:
        self._partitions.pop(pipeline_id, None)
