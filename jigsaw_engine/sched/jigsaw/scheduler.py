"""``JigsawScheduler``: the decide loop that composes the mechanisms (see the package docstring).

After every event it places what is ready: chains already placed continue first (their devices
hold their state), then new training chains (they unblock a pipeline's next step), then new
rollout workers; within each, pipelines by rank. Each mechanism keeps its own state: homes and
their profiles (:class:`.homes.Homes`), the chains placed and the state resident on each device
(:class:`.placement.Placement`), the plan of turns (:class:`.turns.TakingTurns`) and the
interference table of the dynamic split (:class:`.split.DynamicSplit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.interference import InterferenceTable, load_interference_table
from jigsaw_engine.sched.jigsaw.common import MEMORY_FRACTION, ChainKey, JigsawOptions, widened
from jigsaw_engine.sched.jigsaw.homes import Homes
from jigsaw_engine.sched.jigsaw.placement import Placement
from jigsaw_engine.sched.jigsaw.split import DynamicSplit
from jigsaw_engine.sched.jigsaw.turns import TakingTurns
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec
from jigsaw_engine.tasks import Task


class JigsawScheduler:
    uses_predictions = True
    """Ask the controller for roll-forward predictions (chain lengths, rollout ends)."""

    def __init__(
        self,
        cluster: ClusterSpec,
        cost: RooflineCostModel,
        options: JigsawOptions = JigsawOptions(),
        name: str = "jigsaw",
        interference: InterferenceTable | None = None,
    ) -> None:
        self.name = name
        self.options = options
        capacity = cost.device.memory_bytes * MEMORY_FRACTION
        self.homes = Homes(cost, options)
        self.split = DynamicSplit(options, capacity, interference or load_interference_table(), self.homes)
        self.placement = Placement(cluster, cost, options, self.homes, self.split)
        self.turns = TakingTurns(options, capacity, self.homes)

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        """First come, first served homes of the size asked for (no job overtakes another)."""
        return self.homes.admit(view, specs)

    def resources_for_step(self, view: ClusterView, pipeline_id: str, step: int) -> ResourceSpec:
        """One worker for a step that takes turns; otherwise the home, resized."""
        turn = self.turns.step_resources(view, pipeline_id, step)
        return turn if turn is not None else self.homes.resize(view, pipeline_id, step)

    def decide(self, view: ClusterView) -> list[Task]:
        load = dict(view.device_load)
        on_device: dict[int, list[Task]] = {}
        for task in view.running:
            for d in task.devices:
                on_device.setdefault(d, []).append(task)
        owner = self.homes.owners()
        placement = self.placement
        placement.forget_finished(view)
        self.turns.forget_trained(view)
        if self.options.lookahead and self.options.resize:
            self.homes.observe(view, placement.chains)
        tasks: list[Task] = []
        for stage in self._order(view):
            pid, node = stage.pipeline_id, stage.node
            if node.devices == 0:
                tasks.append(Task(pid, node, ()))
                continue
            key: ChainKey = (pid, node.step, node.worker)
            devices = placement.chains.get(key)
            continuing = devices is not None
            turn = not continuing and self.turns.takes_turn(pid, node.step)
            if turn:
                devices = self.turns.devices(view, stage, load, placement.chains, placement.resident)
                if devices is None:
                    continue
            elif devices is None:
                devices = placement.choose(view, stage, load, on_device, owner)
            if devices is not None and len(devices) != node.devices:  # a widened training chain goes on wide
                stage = replace(stage, node=widened(node, len(devices)))
            if devices is None:
                continue
            fit = self.split.fit(view, stage, devices, load, on_device, continuing)
            if fit is None:
                continue
            share, elastic = fit
            setup = placement.switch_s(view.specs[pid], pid, node, devices, continuing, on_device)
            placement.place(key, devices, full_width=turn)
            if turn and node.worker is None:
                self.turns.begin(pid)
            task = Task(pid, stage.node, devices, share=share, elastic=elastic, setup_s=setup)
            for d in devices:
                load[d] = load.get(d, 0.0) + share
                on_device.setdefault(d, []).append(task)
            if node.worker is not None:
                self.homes.rollout_started(pid, node.step, view.now_s)
            tasks.append(task)
        if self.options.widen and not self.options.rollout_only:
            tasks = [placement.widen(view, t, load, owner, on_device) for t in tasks]
        return tasks

    def _order(self, view: ClusterView) -> list[ReadyStage]:
        """Chains already placed continue first (their devices hold their state), then new
        training chains (they unblock a pipeline's next step), then new rollout workers;
        within each, pipelines by rank (:meth:`.homes.Homes.rank`)."""
        rank = self.homes.rank(view)
        chains = self.placement.chains

        def key(stage: ReadyStage) -> tuple[int, int, int]:
            chain = (stage.pipeline_id, stage.node.step, stage.node.worker)
            group = 0 if chain in chains else (1 if stage.node.worker is None else 2)
            return (group, rank[stage.pipeline_id], stage.node.step)

        return sorted(view.ready, key=key)

    def release(self, pipeline_id: str) -> None:
        self.homes.release(pipeline_id)
        self.placement.release(pipeline_id)
        self.turns.release(pipeline_id)
