"""Lending and placement: which devices each chain runs on, and whose state each device holds.

A chain stays on the devices its first sub-stage got (its KV cache or training state lives
there). A rollout chain that finds no free device at home runs on another home's idle devices,
and a training chain widens onto devices left idle (data parallelism: twice the devices, half
the time), so that no device waits while its owner does not need it. With the look-ahead a
loan is made only if the chain, rolled forward on its predicted durations, ends before the
owner wants the device back; without it (``greedy``) every idle device is lent. A device moving
from one pipeline to another pays a warm context switch from host memory.
"""

from __future__ import annotations

from dataclasses import replace

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.graph.substage import SubStage, SubStageKind
from jigsaw_engine.sched.jigsaw.common import EPS, ChainKey, JigsawOptions, ready_chain_s, widened
from jigsaw_engine.sched.jigsaw.homes import Homes
from jigsaw_engine.sched.jigsaw.split import DynamicSplit
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.tasks import Task


class Placement:
    """The chains placed, those widened, and the pipelines resident on each device."""

    def __init__(
        self,
        cluster: ClusterSpec,
        cost: RooflineCostModel,
        options: JigsawOptions,
        homes: Homes,
        split: DynamicSplit,
    ) -> None:
        self.options = options
        self._cluster = cluster
        self._cost = cost
        self._homes = homes
        self._split = split
        self.chains: dict[ChainKey, tuple[int, ...]] = {}
        """The devices each chain under way was placed on."""
        self.widened: dict[ChainKey, bool] = {}
        """Training chains already as wide as they will be."""
        self.resident: dict[int, set[str]] = {}
        """Pipelines whose state is on each device (the rest are parked in host memory)."""

    def place(self, key: ChainKey, devices: tuple[int, ...], *, full_width: bool = False) -> None:
        """The chain ``key`` runs on ``devices``; ``full_width``: never to be widened (a turn's
        training is as wide as planned already)."""
        self.chains[key] = devices
        if full_width:
            self.widened[key] = True

    def forget_finished(self, view: ClusterView) -> None:
        """Chains of steps with nothing ready or running are over."""
        live = {(s.pipeline_id, s.node.step) for s in view.ready} | {(t.pipeline_id, t.node.step) for t in view.running}
        self.chains = {k: v for k, v in self.chains.items() if (k[0], k[1]) in live}
        self.widened = {k: v for k, v in self.widened.items() if k in self.chains}

    def choose(
        self,
        view: ClusterView,
        stage: ReadyStage,
        load: dict[int, float],
        on_device: dict[int, list[Task]],
        owner: dict[int, str],
    ) -> tuple[int, ...] | None:
        """Devices for the first sub-stage of a chain: at home; for a rollout worker also on
        loan (idle devices of another home, or beside another chain's tail)."""
        pid, node = stage.pipeline_id, stage.node
        home = set(self._homes.part(pid, training=node.worker is None))

        def usable(d: int) -> bool:
            if not self._split.fits_beside(pid, node, d, load, on_device):
                return False
            if d in home:
                return True
            return node.worker is not None and self._lendable(view, stage, owner.get(d), d)

        def preference(d: int) -> tuple[int, int, int, int]:
            return (
                0 if d in home else 1,
                1 if load.get(d, 0.0) > EPS else 0,
                0 if pid in self.resident.get(d, ()) else 1,
                d,
            )

        def first_fit(candidates: list[int]) -> tuple[int, ...] | None:
            """The devices chosen from ``candidates`` in order of preference."""
            if len(candidates) < node.devices:
                return None
            if node.worker is None:
                return tuple(sorted(candidates[: node.devices]))
            by_node: dict[int, list[int]] = {}
            for d in candidates:  # a rollout worker's tensor-parallel group stays inside one node
                group = by_node.setdefault(d // self._cluster.devices_per_node, [])
                group.append(d)
                if len(group) == node.devices:
                    return tuple(sorted(group))
            return None

        # Home devices come first in the preference order, so a fit found among them is the
        # answer: the rest of the cluster (hundreds of devices) is scanned only when it is not.
        at_home = sorted((d for d in home if usable(d)), key=preference)
        chosen = first_fit(at_home)
        if chosen is not None or node.worker is None:  # no device away is usable for training
            return chosen
        # Where the node may not share a device, only a free one fits: the scan of a large
        # cluster skips the busy ones before asking (the same devices, found faster).
        shares = self._split.may_share(node)
        away = sorted(
            (d for d in range(view.num_devices) if (shares or load.get(d, 0.0) < EPS) and d not in home and usable(d)),
            key=preference,
        )
        return first_fit(at_home + away)

    def _lendable(self, view: ClusterView, stage: ReadyStage, owner: str | None, device: int) -> bool:
        """May ``stage``'s chain borrow ``device`` of ``owner``'s home?"""
        if not self.options.lookahead:
            return True
        return self.lendable_for(view, owner, stage.chain_s, device)

    def lendable_for(self, view: ClusterView, owner: str | None, chain_s: float, device: int) -> bool:
        """Look-ahead: will ``owner`` want ``device`` back before a chain of ``chain_s`` ends?
        Its training wants its training devices (all of its home when colocated) when its
        rollout ends; a disaggregated owner's generating devices serve rollouts that have
        staleness to spare, so a loan there only delays a rollout the lag already allows for,
        unless it outlasts all the owner's projected remaining work; an owner whose rollouts
        may run several steps ahead can wait up to that many of its recent steps; before its
        first step ends (no recent step to measure the wait in) it is judged as a synchronous
        owner, by when its rollout ends."""
        if owner is None:
            return True
        step_s = view.recent_step_s.get(owner)
        rollout_part = self._homes.rollout_part
        if owner in rollout_part and device in self._homes.home[owner][: rollout_part[owner]]:
            if step_s is None:
                return True
            # A loan outlasting the owner's remaining steps leaves all of them generating on its
            # training part, behind its own updates.
            done, total = view.progress.get(owner, (0, view.specs[owner].total_steps))
            return chain_s <= (total - done) * step_s
        slack_steps = view.specs[owner].staleness - 1 if owner in view.specs else 0
        if slack_steps > 0 and step_s is not None:  # rollouts run steps ahead: its training may wait a little
            return chain_s <= slack_steps * step_s
        # No step of the owner's finished yet (or no slack): it wants the device when its rollout ends.
        if owner not in view.rollout_done_s:
            return False  # between rollout and training: it wants its devices now
        return view.now_s + chain_s <= view.rollout_done_s[owner]

    def switch_s(
        self,
        spec: PipelineSpec,
        pid: str,
        node: SubStage,
        devices: tuple[int, ...],
        same_chain: bool,
        on_device: dict[int, list[Task]],
    ) -> float:
        """The context switch ``node`` pays on ``devices``: none for a chain going on where it
        is, or where its state is resident; what runs there is resident afterwards."""
        cold = not same_chain and any(pid not in self.resident.get(d, set()) for d in devices)
        for d in devices:  # what runs there stays resident; anything else is parked to host memory
            self.resident[d] = {pid} | {t.pipeline_id for t in on_device.get(d, [])}
        if not cold:
            return 0.0
        return self._cost.context_switch_s(spec.model, num_gpus=len(devices), training=node.worker is None)

    def widen(
        self,
        view: ClusterView,
        task: Task,
        load: dict[int, float],
        owner: dict[int, str],
        on_device: dict[int, list[Task]],
    ) -> Task:
        """A training chain just placed at home also takes devices left idle after everything
        else was placed (data parallelism: twice the devices, half the time), up to twice its
        width; with look-ahead only devices whose owner will not want them before the chain ends.
        With the dynamic split it may also take devices running another chain's tail, sharing
        them (:meth:`DynamicSplit.tail_devices`)."""
        node = task.node
        key = (task.pipeline_id, node.step, None)
        if node.worker is not None or not task.devices or task.share < 1.0 or node.kind is SubStageKind.LOAD:
            return task
        if self.chains.get(key) != task.devices or self.widened.get(key):
            return task
        base = len(task.devices)
        chain_s = ready_chain_s(view, task)
        extra: list[int] = []
        for d in range(view.num_devices):
            if len(extra) == base:
                break
            if load.get(d, 0.0) > EPS or d in task.devices:
                continue
            wide_s = chain_s * base / (base + len(extra) + 1)
            if not self.options.lookahead or self.lendable_for(view, owner.get(d), wide_s, d):
                extra.append(d)
        shared = self._split.tail_devices(
            view, task, base + len(extra), 2 * base - base - len(extra), load, owner, on_device, self.lendable_for
        )
        if not extra and not shared:
            return task
        devices = tuple(sorted(task.devices + tuple(extra) + tuple(shared)))
        share, elastic = (1.0 - self.options.tail_share, True) if shared else (1.0, False)
        for d in devices:
            load[d] = (load.get(d, 0.0) if d in shared else 0.0) + share
            self.resident[d] = {task.pipeline_id} | (
                {t.pipeline_id for t in on_device.get(d, [])} if d in shared else set()
            )
        self.chains[key] = devices
        self.widened[key] = True
        spec = view.specs[task.pipeline_id]
        switch = self._cost.context_switch_s(spec.model, num_gpus=len(devices), training=True)
        return replace(
            task,
            node=widened(node, len(devices)),
            devices=devices,
            share=share,
            elastic=elastic,
            setup_s=max(task.setup_s, switch),
        )

    def release(self, pipeline_id: str) -> None:
        self.chains = {k: v for k, v in self.chains.items() if k[0] != pipeline_id}
        self.widened = {k: v for k, v in self.widened.items() if k[0] != pipeline_id}
        for pids in self.resident.values():
            pids.discard(pipeline_id)
