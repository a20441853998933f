"""Taking turns: alike synchronous pipelines roll out on one worker each and train, one after
another, on a wide group.

A long-tailed rollout barely shortens with more workers while training is data parallel, so
narrow rollouts free devices for wide trainings, whose turns stagger the pipelines' phases.
The look-ahead plans turns only when they project a shorter step than the pipelines' homes
give; each round of turns goes in priority order, otherwise first come, first served.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jigsaw_engine.graph.builder import TRAIN_STATE_BYTES_PER_PARAM
from jigsaw_engine.sched.jigsaw.common import EPS, ChainKey, JigsawOptions
from jigsaw_engine.sched.jigsaw.homes import MIN_SHRINK_GAIN, Homes
from jigsaw_engine.sched.jigsaw.projection import turns_devices, turns_step_s
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
from jigsaw_engine.spec.pipeline import ResourceSpec, SyncMode

TURN_HOME_WORKERS = 2
"""Widest home (in rollout workers) whose observed rollout stands for a one-worker one when
planning turns: a long-tailed rollout barely shortens from one worker to two, but one observed
on many workers ran its batch many ways, and on one it would run far slower
(``docs/benchmarks.md``, taking turns)."""


@dataclass(frozen=True, slots=True)
class Turns:
    """Like pipelines taking turns to train: each rolls out on its own ``tp`` devices (one
    worker) and then trains on ``width`` devices, its own plus devices no one rolls out on (and
    the idle own devices of pipelines waiting for a later turn); ``at_once`` train at a time.
    Projected step: ``period_s``."""

    members: frozenset[str]
    width: int
    at_once: int
    period_s: float


class TakingTurns:
    """The current plan of turns, the steps built to take them and the turns each has begun."""

    def __init__(self, options: JigsawOptions, capacity: float, homes: Homes) -> None:
        self.options = options
        self._capacity = capacity
        self._homes = homes
        self.current: Turns | None = None
        self._steps: dict[tuple[str, int], int] = {}
        """Steps built to take turns, and the width their training takes."""
        self._begun: dict[str, int] = {}
        """Turns each pipeline has begun to train under the current plan."""

    def step_resources(self, view: ClusterView, pipeline_id: str, step: int) -> ResourceSpec | None:
        """One worker's devices for a step of a pipeline taking turns (its training is widened
        when placed), or None where it takes none."""
        turns = self.plan(view)
        if turns is None or pipeline_id not in turns.members:
            return None
        self._steps[(pipeline_id, step)] = turns.width
        tp = view.specs[pipeline_id].resources.tp
        return ResourceSpec(num_gpus=tp, tp=tp)

    def plan(self, view: ClusterView) -> Turns | None:
        """Look-ahead: should the pipelines take turns (:class:`Turns`)? Only when every
        pipeline running is alike (so their turns are even), synchronous and colocated, each
        has a step profile, and the best turn-taking layout is projected to step at least
        ``MIN_SHRINK_GAIN`` sooner than their homes do. The one-worker rollout is taken at
        the wall time observed at home, so only homes of at most ``TURN_HOME_WORKERS`` workers
        qualify; a training on ``w`` devices at the profile's device-seconds over ``w`` plus
        the weight sync. Kept while the same pipelines run."""
        members = frozenset(view.specs)
        if self.current is not None and self.current.members == members:
            return self.current
        self.current = None
        self._begun = {}
        o = self.options  # a turn's training is widened, so not where training keeps its width
        if not (o.take_turns and o.lookahead and o.resize and o.widen) or o.rollout_only or view.queued:
            return None
        specs = list(view.specs.values())
        alike = {(s.model.name, s.workload.name, s.algorithm, s.resources.tp, s.ppo_epochs) for s in specs}
        profiles_seen = self._homes.profiles
        if len(specs) < 2 or len(alike) != 1 or any(pid not in profiles_seen for pid in view.specs):
            return None
        if any(s.mode is not SyncMode.SYNC or s.resources.rollout_gpus is not None for s in specs):
            return None
        home = self._homes.home
        tp, count, devices = specs[0].resources.tp, len(specs), len(view.usable())
        if count * tp > devices or any(len(home[pid]) > TURN_HOME_WORKERS * tp for pid in view.specs):
            return None
        profiles = [profiles_seen[pid] for pid in view.specs]
        rollout_s = max(p.serial_s - p.sync_s for p in profiles)
        homes_s = max(p.step_s(len(home[pid])) for pid, p in zip(view.specs, profiles, strict=True))
        state = TRAIN_STATE_BYTES_PER_PARAM * specs[0].model.num_params
        best: Turns | None = None
        for width in range(tp, devices + 1, tp):
            if width * self._capacity < state:
                continue  # the training state does not fit on so few devices
            train_s = max(p.scalable_gpu_s / width + p.sync_s for p in profiles)
            for at_once in range(1, count + 1):
                if turns_devices(count, at_once, tp, width) > devices:
                    break
                period = turns_step_s(rollout_s, train_s, count, at_once)
                if best is None or period < best.period_s:
                    best = Turns(members, width, at_once, period)
        if best is not None and best.period_s < (1 - MIN_SHRINK_GAIN) * homes_s:
            self.current = best
        return self.current

    def takes_turn(self, pipeline_id: str, step: int) -> bool:
        return (pipeline_id, step) in self._steps

    def devices(
        self,
        view: ClusterView,
        stage: ReadyStage,
        load: Mapping[int, float],
        chains: Mapping[ChainKey, tuple[int, ...]],
        resident: Mapping[int, set[str]],
    ) -> tuple[int, ...] | None:
        """Devices for a chain of a step that takes turns, or None to wait: a rollout worker on
        the pipeline's own ``tp`` devices; its training there too, plus the free devices nobody
        takes turns rolling out on, as many as the turn's width (it waits for a whole turn
        rather than start narrow and hold them longer), plus the own devices of pipelines
        waiting for a later turn (idle until this one ends, when the next turn begins). A turn
        also waits for the turn it owes a pipeline of higher priority (:meth:`_owed`).
        ``chains``: the chains placed; ``resident``: whose state is on each device."""
        pid, node = stage.pipeline_id, stage.node
        home = self._homes.home
        tp = view.specs[pid].resources.tp
        own = home[pid][: node.devices if node.worker is not None else tp]
        if any(load.get(d, 0.0) > EPS for d in own):
            return None
        if node.worker is not None:
            return own
        usable = view.usable()  # a node lost since the turn was planned takes its devices with it
        width = min(self._steps[(pid, node.step)], len(usable) // tp * tp)
        rolling = {d for p, _ in self._steps for d in home[p][: view.specs[p].resources.tp]}
        spare = [d for d in usable if d not in rolling and load.get(d, 0.0) < EPS]
        spare.sort(key=lambda d: (0 if pid in resident.get(d, ()) else 1, d))
        if len(own) + len(spare) < width:
            return None
        left = len(spare) - (width - len(own))  # spare devices another turn could start on
        if left < width - tp and self._owed(view, pid, chains):
            return None
        waiting = {
            s.pipeline_id
            for s in view.ready
            if s.pipeline_id != pid
            and s.node.worker is None
            and s.node.devices > 0
            and (s.pipeline_id, s.node.step) in self._steps
            and (s.pipeline_id, s.node.step, None) not in chains
        }
        idle = [d for p in sorted(waiting) for d in home[p][:tp] if load.get(d, 0.0) < EPS]
        return tuple(sorted(own + tuple(spare[: width - len(own)]) + tuple(idle)))

    def _owed(self, view: ClusterView, pid: str, chains: Mapping[ChainKey, tuple[int, ...]]) -> bool:
        """Does ``pid`` owe its next turn to a pipeline of higher priority: one with a turn to
        come that has begun no more turns than ``pid`` under the current plan? First come,
        first served alone would keep, step after step, the order the pipelines happened to
        finish their first rollouts in, whatever their priorities; so each round's turns go in
        priority order. A pipeline never waits for a lower priority, so the one waited for
        takes its turn as soon as its rollout ends."""
        priority, begun = view.specs[pid].priority, self._begun.get(pid, 0)
        return any(
            other != pid
            and view.specs[other].priority > priority
            and (other, step, None) not in chains
            and self._begun.get(other, 0) <= begun
            for other, step in self._steps
        )

    def begin(self, pipeline_id: str) -> None:
        """``pipeline_id``'s training took its turn."""
        self._begun[pipeline_id] = self._begun.get(pipeline_id, 0) + 1

    def forget_trained(self, view: ClusterView) -> None:
        """Steps trained already are done with their turns."""
        self._steps = {k: v for k, v in self._steps.items() if k[1] >= view.progress.get(k[0], (0, 0))[0]}

    def release(self, pipeline_id: str) -> None:
        self._steps = {k: v for k, v in self._steps.items() if k[0] != pipeline_id}
        self._begun.pop(pipeline_id, None)
