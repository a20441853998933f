"""Each pipeline on a dedicated partition of its own devices.

Colocated (verl): rollout and training share the partition and alternate strictly (the
graph's edges make training wait for the whole rollout). Disaggregated (``rollout_gpus`` set,
StreamRL): the first ``rollout_gpus`` devices of the partition generate, the rest train.
Admission is first come, first served, and no pipeline overtakes an earlier one. With every
pipeline asking for the whole cluster the same policy runs them one after another: verl's
other deployment, "serial on the whole cluster".

With ``tail_share`` (AReaL's continuous generation) a worker's tail decode holds only that
share of its devices, and the worker's next rollout sub-stage may start beside it on the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

from jigsaw_engine.graph.substage import SubStage, SubStageKind
from jigsaw_engine.sched.protocol import ClusterView
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.tasks import Task

SHARE_EPSILON = 1e-9


class DedicatedScheduler:
    name = "dedicated"

    def __init__(self, *, tail_share: float | None = None) -> None:
        self._partitions: dict[str, tuple[int, ...]] = {}
        self._tail_share = tail_share

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        taken = {d for part in self._partitions.values() for d in part}
        admitted: list[str] = []
        for pid in view.queued:
            need = specs[pid].resources.num_gpus
            free = [d for d in view.usable() if d not in taken]
            if need > len(free):
                break  # strict arrival order
            self._partitions[pid] = tuple(free[:need])
            taken.update(free[:need])
            admitted.append(pid)
        return admitted

    def decide(self, view: ClusterView) -> list[Task]:
        load = dict(view.device_load)
        tasks: list[Task] = []
        for stage in view.ready:
            node = stage.node
            devices = self._devices(stage.pipeline_id, node, view)
            used = max((load.get(d, 0.0) for d in devices), default=0.0)
            placement = self._share(node, used)
            if placement is None:
                continue
            share, elastic = placement
            for d in devices:
                load[d] = load.get(d, 0.0) + share
            tasks.append(Task(stage.pipeline_id, node, devices, share=share, elastic=elastic))
        return tasks

    def _devices(self, pipeline_id: str, node: SubStage, view: ClusterView) -> tuple[int, ...]:
        part = self._partitions[pipeline_id]
        resources = view.specs[pipeline_id].resources
        if node.devices == 0:
            return ()
        if node.worker is not None:
            return part[node.worker * node.devices : (node.worker + 1) * node.devices]
        if node.kind is SubStageKind.LOAD or resources.rollout_gpus is None:
            return part
        return part[resources.rollout_gpus :]  # the trainer's own devices

    def _share(self, node: SubStage, used: float) -> tuple[float, bool] | None:
        """(share, elastic) for ``node`` on devices of which ``used`` is reserved; None: wait."""
        if node.devices == 0:
            return 1.0, False
        if self._tail_share is None or node.worker is None:
            return (1.0, False) if used < SHARE_EPSILON else None
        tail, rest = self._tail_share, 1.0 - self._tail_share
        is_tail = node.kind is SubStageKind.DECODE and node.bucket == "tail"
        if used < SHARE_EPSILON:  # alone: a tail needs few SMs; other work takes all it can
            return (tail, False) if is_tail else (rest, True)
        if abs(used - tail) < SHARE_EPSILON:  # beside a tail
            return (rest, not is_tail)
        if abs(used - rest) < SHARE_EPSILON and is_tail:  # a tail beside the next step's work
            return tail, False
        return None

    def release(self, pipeline_id: str) -> None:
        self._partitions.pop(pipeline_id, None)
