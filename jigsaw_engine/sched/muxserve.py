"""MuxServe adapted to RL: the rollouts of a group's pipelines share devices spatially.

Each group (one pipeline, or two) runs on its own devices, every member colocated on all of
them. Rollout sub-stages of the members co-run on a device with half of its compute each
(the interference table says what that costs); with no partner rollout waiting, a rollout
sub-stage takes the whole device. Training stays exclusive: a member's log-prob, update and
weight-sync sub-stages take the group's devices to themselves once the rollouts there drain
(no new rollout starts on devices a training sub-stage is waiting for), and bringing a
member's training state back onto devices that last trained the other costs a warm context
switch (:meth:`RooflineCostModel.context_switch_s`). Both members' weights stay resident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.tasks import Task

PAIR_SHARE = 0.5
SHARE_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class MuxGroup:
    members: tuple[str, ...]
    """One pipeline or two (the interference table describes pairs)."""
    devices: tuple[int, ...]


class MuxServeScheduler:
    name = "muxserve"

    def __init__(self, groups: list[MuxGroup], cost: RooflineCostModel) -> None:
        for g in groups:
            if not 1 <= len(g.members) <= 2:
                raise ValueError(f"a MuxServe group has one or two pipelines, got {g.members}")
        self._group_of = {pid: g for g in groups for pid in g.members}
        self._cost = cost
        self._trained_last: dict[int, str] = {}
        """Whose training state each device holds."""

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        return [pid for pid in view.queued if pid in self._group_of]

    def decide(self, view: ClusterView) -> list[Task]:
        load = dict(view.device_load)
        tasks: list[Task] = []
        wanted: set[int] = set()
        for stage in view.ready:  # training first: it needs whole devices, rollouts must drain
            pid, node = stage.pipeline_id, stage.node
            if node.devices == 0:
                tasks.append(Task(pid, node, ()))
            elif node.worker is None:
                devices = self._group_of[pid].devices
                if any(load.get(d, 0.0) > SHARE_EPSILON for d in devices):
                    wanted.update(devices)
                    continue
                tasks.append(Task(pid, node, devices, setup_s=self._switch_s(pid, view.specs[pid], devices)))
                load.update(dict.fromkeys(devices, 1.0))
        rollouts = [s for s in view.ready if s.node.worker is not None and s.node.devices > 0]
        for stage in rollouts:
            devices = self._worker_devices(stage)
            if wanted.intersection(devices):
                continue
            used = max(load.get(d, 0.0) for d in devices)
            partner_waiting = any(
                o.pipeline_id != stage.pipeline_id and set(self._worker_devices(o)) & set(devices) for o in rollouts
            )
            share = PAIR_SHARE if used > SHARE_EPSILON or partner_waiting else 1.0
            if used + share > 1 + SHARE_EPSILON:
                continue
            for d in devices:
                load[d] = load.get(d, 0.0) + share
            tasks.append(Task(stage.pipeline_id, stage.node, devices, share=share))
        return tasks

    def release(self, pipeline_id: str) -> None:
        self._trained_last = {d: p for d, p in self._trained_last.items() if p != pipeline_id}

    def _worker_devices(self, stage: ReadyStage) -> tuple[int, ...]:
        lo = stage.node.worker * stage.node.devices if stage.node.worker is not None else 0
        return self._group_of[stage.pipeline_id].devices[lo : lo + stage.node.devices]

    def _switch_s(self, pid: str, spec: PipelineSpec, devices: tuple[int, ...]) -> float:
        cold = any(self._trained_last.get(d, pid) != pid for d in devices)
        self._trained_last.update(dict.fromkeys(devices, pid))
        return self._cost.context_switch_s(spec.model, num_gpus=len(devices), training=True) if cold else 0.0
