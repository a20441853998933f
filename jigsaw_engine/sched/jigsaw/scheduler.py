"""The Jigsaw scheduler (DESIGN.md §3.2): pipelines' sub-stages fitted into each other's gaps.

Every pipeline has a home: devices its own chains run on first (a rollout worker's prefill and
decode buckets, or a step's log-probs, mini-batches and weight sync; a chain stays on the
devices its first sub-stage got, because its KV cache or training state lives there). Homes
are resized at every step: the pipelines still running take over the devices of those that
finished. The gaps a home leaves (workers done early and waiting for the slowest, tool calls,
memory-bound tails) are filled with other pipelines' work. Mechanisms, each switchable for the
ablations:

- **lending** (always on): a rollout chain that finds no free device at home may run on
  another pipeline's idle home devices.
- **dynamic split** (``colocate``, off by default, see :class:`JigsawOptions`): a memory-bound
  tail decode holds only ``tail_share`` of its
  devices, and a compute-bound sub-stage of another chain takes the rest, elastically, growing
  back to the whole device when the tail ends; only where both fit in device memory. The
  runtime charges the interference table.
- **resize** (``resize``): each step's data-parallel width is chosen when its graph is built.
- **look-ahead** (``lookahead``): a loan is made only if the borrowed chain, rolled forward on
  its predicted durations, ends before the owner's rollout does (when the owner's training
  will want its home back); homes are resized to bring in the latest projected completion
  (:mod:`jigsaw_engine.sched.jigsaw.projection`: each pipeline's steps profiled as a serial rollout
  plus data-parallel training, devices handed to whichever is projected to end last, a sync
  home shrinking for it only within ``max_slowdown`` of its own step time and only for a
  real gain; a higher priority then takes devices until it is projected the lower latency
  ratio, :func:`~jigsaw_engine.sched.jigsaw.projection.priority_ordered`); pipelines are ranked by
  projected remaining time weighted by priority.
  Without it (``greedy``): every idle device is lent, homes grow in proportion to what was
  asked for, and pipelines go in arrival order.
- **taking turns** (``take_turns``, look-ahead only): alike synchronous pipelines each roll out
  on one worker and take turns to train on a wide group (:class:`Turns`), when the look-ahead
  projects a shorter step than their homes give. Each round of turns goes in priority order,
  otherwise first come, first served.

A device moving from one pipeline to another pays a warm context switch (the state comes from
host memory, :meth:`RooflineCostModel.context_switch_s`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.interference import InterferenceTable, load_interference_table
from jigsaw_engine.graph.builder import TRAIN_STATE_BYTES_PER_PARAM, GraphConfig
from jigsaw_engine.graph.substage import ResourceClass, SubStage, SubStageKind
from jigsaw_engine.sched.jigsaw.projection import (
    Demand,
    StepProfile,
    balanced_widths,
    fair_floor,
    priority_ordered,
    turns_devices,
    turns_step_s,
)
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec, SyncMode
from jigsaw_engine.tasks import Task

JIGSAW_GRAPH = GraphConfig(dispatch="longest_first", overlap_rollouts=True, migrate_tails=True, early_logprobs=True)
"""How Jigsaw's pipelines are cut into sub-stages: length-aware dispatch, an async worker's next
rollout beside its tail, long-tail migration."""
EPS = 1e-9
MEMORY_FRACTION = 0.9
"""Share of device memory sub-stages may fill together (the rest: allocator slack, buffers)."""

PROFILE_ALPHA = 0.5
"""Weight of the newest step in a pipeline's step profile (look-ahead resize)."""
MAX_RESIZE_FACTOR = 2
"""A look-ahead resize at most doubles or halves a home per step: the step profile is measured
at one width, and a rollout on far fewer workers is slower than the profile says."""
MIN_SHRINK_GAIN = 0.05
"""A look-ahead resize shrinks a home only if that brings the latest projected completion in
by at least this fraction."""

TURN_HOME_WORKERS = 2
"""Widest home (in rollout workers) whose observed rollout stands for a one-worker one when
planning turns: a long-tailed rollout barely shortens from one worker to two (M1: 36.4 s on
one, 32.1 s on two), but a rollout observed on eight ran its batch eight ways (random mix 7:
two 0.6B jobs of 8 devices each taking turns on one worker ran 0.74x as fast)."""

ChainKey = tuple[str, int, int | None]
"""(pipeline, step, worker): a rollout worker's chain, or (worker None) a step's training chain."""


@dataclass(frozen=True, slots=True)
class JigsawOptions:
    lookahead: bool = True
    colocate: bool = False
    """The dynamic split. Off by default: under the modelled interference table it cost
    throughput on every built-in mix (``jigsaw-with-split`` in ``jigsaw bench``), even gated by
    the look-ahead; turn it on with a measured table that says otherwise."""
    resize: bool = True
    widen: bool = True
    """Training chains also take devices left idle, up to twice their width."""
    take_turns: bool = True
    """Like pipelines (same model, task and layout, all synchronous) take turns to train on a
    wide group while the others roll out on one worker each (:class:`Turns`); chosen by the
    look-ahead only when it projects a shorter step."""
    rollout_only: bool = False
    """Multiplex rollout sub-stages only (idle devices lent to rollout workers): training chains
    stay on their home, never widened nor beside a tail."""
    tail_share: float = 0.3
    max_slowdown: float = 1.5
    """Look-ahead resize: a pipeline gives devices to one projected to finish later only while
    its own projected step time stays within this factor of its time on what it asked for."""


@dataclass(frozen=True, slots=True)
class Turns:
    """Like pipelines taking turns to train: each rolls out on its own ``tp`` devices (one
    worker) and then trains on ``width`` devices, its own plus devices no one rolls out on (and
    the idle own devices of pipelines waiting for a later turn); ``at_once`` train at a time.
    A long-tailed rollout barely shortens with more workers while training is data parallel,
    so narrow rollouts free devices for wide trainings, whose turns stagger the pipelines'
    phases. Projected step: ``period_s``."""

    members: frozenset[str]
    width: int
    at_once: int
    period_s: float


def _is_tail(node: SubStage) -> bool:
    return node.kind is SubStageKind.DECODE and node.bucket == "tail"


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
        self._cluster = cluster
        self._cost = cost
        self._capacity = cost.device.memory_bytes * MEMORY_FRACTION
        self._interference = interference or load_interference_table()
        self._home: dict[str, tuple[int, ...]] = {}
        self._chains: dict[ChainKey, tuple[int, ...]] = {}
        self._resident: dict[int, set[str]] = {}
        """Pipelines whose state is on each device (the rest are parked in host memory)."""
        self._arrival: dict[str, int] = {}
        """Admission order of the pipelines held (a counter, so forgetting one never reuses a number)."""
        self._admitted = 0
        self._widened: dict[ChainKey, bool] = {}
        self._rollout_part: dict[str, int] = {}
        """Disaggregated pipelines (async, with ``rollout_gpus``): devices of the home that generate."""
        self._step_start: dict[tuple[str, int], float] = {}
        """When each open step's first rollout sub-stage started."""
        self._step_began: dict[str, tuple[int, float]] = {}
        """(step, time) each pipeline's newest step began generating."""
        self._profile: dict[str, StepProfile] = {}
        """Each pipeline's observed steps, smoothed (the look-ahead resize's projection)."""
        self._turns: Turns | None = None
        self._turn_steps: dict[tuple[str, int], int] = {}
        """Steps built to take turns, and the width their training takes."""
        self._turns_begun: dict[str, int] = {}
        """Turns each pipeline has begun to train under the current plan."""

    # -- admission and resizing --------------------------------------------------------
    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        """First come, first served homes of the size asked for (no job overtakes another)."""
        admitted = []
        for pid in view.queued:
            free = self._unowned(view.num_devices)
            need = specs[pid].resources.num_gpus
            if need > len(free):
                break
            self._home[pid] = tuple(free[:need])
            self._arrival[pid] = self._admitted
            self._admitted += 1
            admitted.append(pid)
        return admitted

    def _unowned(self, num_devices: int) -> list[int]:
        owned = {d for home in self._home.values() for d in home}
        return [d for d in range(num_devices) if d not in owned]

    def resources_for_step(self, view: ClusterView, pipeline_id: str, step: int) -> ResourceSpec:
        """The step's width: the home, grown from devices nobody owns when resizing, and back to
        what was asked for while another pipeline waits for admission. With look-ahead a home
        may also shrink, to hand devices to the pipeline projected to finish last."""
        asked = view.specs[pipeline_id].resources
        home = self._home[pipeline_id]
        turns = self._plan_turns(view)
        if turns is not None and pipeline_id in turns.members:
            self._turn_steps[(pipeline_id, step)] = turns.width
            return ResourceSpec(num_gpus=asked.tp, tp=asked.tp)
        if view.queued and len(home) > asked.num_gpus:
            home = self._home[pipeline_id] = home[: asked.num_gpus]
        elif self.options.resize and not view.queued and pipeline_id in view.recent_step_s:
            # Grow from the second step on: a pipeline arriving meanwhile finds devices at once.
            target = self._target_width(view, pipeline_id, step)
            if self.options.lookahead and pipeline_id in self._profile:
                low = max(_min_width(asked), len(home) // MAX_RESIZE_FACTOR // asked.tp * asked.tp)
                target = min(max(target, low), MAX_RESIZE_FACTOR * len(home))
                # Only a sync pipeline shrinks: it is between steps now. An async one may have an
                # earlier step still to train on the devices it was built for.
                if target < len(home) and view.specs[pipeline_id].mode is SyncMode.SYNC:
                    home = self._home[pipeline_id] = home[:target]
            spare = self._unowned(view.num_devices)
            grow = max(0, min(target - len(home), len(spare)))
            grow -= (len(home) + grow) % asked.tp
            if grow > 0:
                home = home + tuple(spare[:grow])
                self._home[pipeline_id] = home
        width = len(home) // asked.tp * asked.tp
        if asked.rollout_gpus is None:
            return ResourceSpec(num_gpus=width, tp=asked.tp)
        # Keep the pools' proportions as the home grows.
        rollout = asked.rollout_gpus * width // asked.num_gpus // asked.tp * asked.tp
        rollout = min(max(asked.tp, rollout), width - 1)
        self._rollout_part[pipeline_id] = rollout
        return ResourceSpec(num_gpus=width, tp=asked.tp, rollout_gpus=rollout)

    def _plan_turns(self, view: ClusterView) -> Turns | None:
        """Look-ahead: should the pipelines take turns (:class:`Turns`)? Only when every
        pipeline running is alike (so their turns are even), synchronous and colocated, each
        has a step profile, and the best turn-taking layout is projected to step at least
        ``MIN_SHRINK_GAIN`` sooner than their homes do. The one-worker rollout is taken at
        the wall time observed at home, so only homes of at most ``TURN_HOME_WORKERS`` workers
        qualify; a training on ``w`` devices at the profile's device-seconds over ``w`` plus
        the weight sync. Kept while the same pipelines run."""
        members = frozenset(view.specs)
        if self._turns is not None and self._turns.members == members:
            return self._turns
        self._turns = None
        self._turns_begun = {}
        o = self.options  # a turn's training is widened, so not where training keeps its width
        if not (o.take_turns and o.lookahead and o.resize and o.widen) or o.rollout_only or view.queued:
            return None
        specs = list(view.specs.values())
        alike = {(s.model.name, s.workload.name, s.algorithm, s.resources.tp, s.ppo_epochs) for s in specs}
        if len(specs) < 2 or len(alike) != 1 or any(pid not in self._profile for pid in view.specs):
            return None
        if any(s.mode is not SyncMode.SYNC or s.resources.rollout_gpus is not None for s in specs):
            return None
        tp, count, devices = specs[0].resources.tp, len(specs), view.num_devices
        if count * tp > devices or any(len(self._home[pid]) > TURN_HOME_WORKERS * tp for pid in view.specs):
            return None
        profiles = [self._profile[pid] for pid in view.specs]
        rollout_s = max(p.serial_s - p.sync_s for p in profiles)
        homes_s = max(p.step_s(len(self._home[pid])) for pid, p in zip(view.specs, profiles, strict=True))
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
            self._turns = best
        return self._turns

    def _target_width(self, view: ClusterView, pipeline_id: str, step: int) -> int:
        """Lookahead, a pipeline whose last step was observed: the width that brings in the
        latest projected completion (:func:`balanced_widths`). Lookahead otherwise: a share of
        the cluster in proportion to projected remaining work (steps left x recent step latency
        x width). Greedy: in proportion to what each asked for."""
        if self.options.lookahead and pipeline_id in self._profile:
            return self._balanced(view, pipeline_id, step)

        def remaining(pid: str) -> float:
            done, total = view.progress.get(pid, (0, 1))
            step_s = view.recent_step_s.get(pid)
            if not self.options.lookahead or step_s is None:
                return float(view.specs[pid].resources.num_gpus)
            return (total - done) * step_s * len(self._home[pid])

        work = {pid: remaining(pid) for pid in view.specs}
        return math.floor(view.num_devices * work[pipeline_id] / (sum(work.values()) or 1.0))

    def _balanced(self, view: ClusterView, pipeline_id: str, step: int) -> int:
        demands: dict[str, Demand] = {}
        for pid, spec in view.specs.items():
            done, total = view.progress.get(pid, (0, spec.total_steps))
            asked, profile = spec.resources, self._profile.get(pid)
            floor = _min_width(asked)
            steps_left = float(total - (step if pid == pipeline_id else done))
            if profile is not None:
                floor = max(floor, fair_floor(profile, asked.num_gpus, asked.tp, self.options.max_slowdown))
                began = self._step_began.get(pid)
                if pid != pipeline_id and began is not None and began[0] == done:
                    # Part of its current step is behind it (never counted as all of it: it may run late).
                    elapsed = (view.now_s - began[1]) / profile.step_s(len(self._home[pid]))
                    steps_left -= min(0.9, elapsed)
            demands[pid] = Demand(
                steps_left=steps_left,
                profile=profile,
                width=len(self._home[pid]),
                floor=floor,
                tp=asked.tp,
                priority=spec.priority,
                asked=asked.num_gpus,
            )
        widths = balanced_widths(demands, view.num_devices)
        ordered = priority_ordered(demands, widths, view.num_devices)
        home = len(self._home[pipeline_id])
        if widths[pipeline_id] >= home or ordered[pipeline_id] != widths[pipeline_id]:
            return ordered[pipeline_id]

        def latest(w: Mapping[str, int]) -> float:
            return max(d.remaining_s(w[pid]) for pid, d in demands.items())

        # Shrink only for a real gain: moving devices between pipelines projected to end about
        # together only trades one's noise for the other's (and costs context switches).
        now = {pid: d.width for pid, d in demands.items()}
        return widths[pipeline_id] if latest(widths) < (1 - MIN_SHRINK_GAIN) * latest(now) else home

    def _observe(self, view: ClusterView) -> None:
        """Profile each pipeline's step as its training becomes ready: the rollout's wall time
        so far plus the weight sync are serial, the training chain's device-seconds scale."""
        now = view.now_s
        stale = [k for k in self._step_start if k[1] < view.progress.get(k[0], (0, 0))[0]]
        for key in stale:  # steps trained already (an async worker may start one after its training)
            del self._step_start[key]
        for stage in view.ready:
            pid, node = stage.pipeline_id, stage.node
            if node.worker is not None or node.devices == 0 or (pid, node.step, None) in self._chains:
                continue
            started = self._step_start.pop((pid, node.step), None)
            if started is None:
                continue
            spec = view.specs[pid]
            sync_s = self._cost.weight_sync_s(spec.model)
            # Per device of the whole home: a disaggregated home trains on its training part only.
            home = len(self._home[pid])
            per_home = home / max(1, home - self._rollout_part.get(pid, 0))
            lag = spec.staleness if spec.mode is SyncMode.ASYNC else 0
            seen = StepProfile(
                now - started + sync_s, max(0.0, stage.chain_s - sync_s) * node.devices * per_home, lag, sync_s
            )
            last = self._profile.get(pid)
            if last is not None:  # one step's sampling noise averaged out, as the graph predictor does
                a = PROFILE_ALPHA
                seen = StepProfile(
                    a * seen.serial_s + (1 - a) * last.serial_s,
                    a * seen.scalable_gpu_s + (1 - a) * last.scalable_gpu_s,
                    lag,
                    sync_s,
                )
            self._profile[pid] = seen

    # -- placement ---------------------------------------------------------------------
    def decide(self, view: ClusterView) -> list[Task]:
        load = dict(view.device_load)
        on_device: dict[int, list[Task]] = {}
        for task in view.running:
            for d in task.devices:
                on_device.setdefault(d, []).append(task)
        owner = {d: pid for pid, home in self._home.items() for d in home}
        self._forget_finished_chains(view)
        if self.options.lookahead and self.options.resize:
            self._observe(view)
        tasks: list[Task] = []
        for stage in self._order(view):
            pid, node = stage.pipeline_id, stage.node
            if node.devices == 0:
                tasks.append(Task(pid, node, ()))
                continue
            key: ChainKey = (pid, node.step, node.worker)
            devices = self._chains.get(key)
            turn = devices is None and (pid, node.step) in self._turn_steps
            if turn:
                devices = self._take_turn(view, stage, load)
                if devices is None:
                    continue
                self._widened[key] = True  # a turn's training is as wide as planned already
            elif devices is None:
                devices = self._choose(view, stage, load, on_device, owner)
            if devices is not None and len(devices) != node.devices:  # a widened training chain goes on wide
                stage = replace(stage, node=_widened(node, len(devices)))
            if devices is None or (placement := self._fit(view, stage, devices, load, on_device)) is None:
                continue
            share, elastic = placement
            setup = self._switch_s(view.specs[pid], pid, node, devices, key in self._chains, on_device)
            self._chains[key] = devices
            if turn and node.worker is None:
                self._turns_begun[pid] = self._turns_begun.get(pid, 0) + 1
            task = Task(pid, stage.node, devices, share=share, elastic=elastic, setup_s=setup)
            for d in devices:
                load[d] = load.get(d, 0.0) + share
                on_device.setdefault(d, []).append(task)
            if node.worker is not None and (pid, node.step) not in self._step_start:
                self._step_start[(pid, node.step)] = view.now_s
                if self._step_began.get(pid, (-1, 0.0))[0] < node.step:
                    self._step_began[pid] = (node.step, view.now_s)
            tasks.append(task)
        if self.options.widen and not self.options.rollout_only:
            tasks = [self._widen(view, t, load, owner, on_device) for t in tasks]
        return tasks

    def _take_turn(self, view: ClusterView, stage: ReadyStage, load: Mapping[int, float]) -> tuple[int, ...] | None:
        """Devices for a chain of a step that takes turns, or None to wait: a rollout worker on
        the pipeline's own ``tp`` devices; its training there too, plus the free devices nobody
        takes turns rolling out on, as many as the turn's width (it waits for a whole turn
        rather than start narrow and hold them longer), plus the own devices of pipelines
        waiting for a later turn (idle until this one ends, when the next turn begins). A turn
        also waits for the turn it owes a pipeline of higher priority (:meth:`_turn_owed`)."""
        pid, node = stage.pipeline_id, stage.node
        tp = view.specs[pid].resources.tp
        own = self._home[pid][: node.devices if node.worker is not None else tp]
        if any(load.get(d, 0.0) > EPS for d in own):
            return None
        if node.worker is not None:
            return own
        width = self._turn_steps[(pid, node.step)]
        rolling = {d for p, _ in self._turn_steps for d in self._home[p][: view.specs[p].resources.tp]}
        spare = [d for d in range(view.num_devices) if d not in rolling and load.get(d, 0.0) < EPS]
        spare.sort(key=lambda d: (0 if pid in self._resident.get(d, ()) else 1, d))
        if len(own) + len(spare) < width:
            return None
        left = len(spare) - (width - len(own))  # spare devices another turn could start on
        if left < width - tp and self._turn_owed(view, pid):
            return None
        waiting = {
            s.pipeline_id
            for s in view.ready
            if s.pipeline_id != pid
            and s.node.worker is None
            and s.node.devices > 0
            and (s.pipeline_id, s.node.step) in self._turn_steps
            and (s.pipeline_id, s.node.step, None) not in self._chains
        }
        idle = [d for p in sorted(waiting) for d in self._home[p][:tp] if load.get(d, 0.0) < EPS]
        return tuple(sorted(own + tuple(spare[: width - len(own)]) + tuple(idle)))

    def _turn_owed(self, view: ClusterView, pid: str) -> bool:
        """Does ``pid`` owe its next turn to a pipeline of higher priority: one with a turn to
        come that has begun no more turns than ``pid`` under the current plan? First come,
        first served alone would keep, step after step, the order the pipelines happened to
        finish their first rollouts in, whatever their priorities; so each round's turns go in
        priority order. A pipeline never waits for a lower priority, so the one waited for
        takes its turn as soon as its rollout ends."""
        priority, begun = view.specs[pid].priority, self._turns_begun.get(pid, 0)
        return any(
            other != pid
            and view.specs[other].priority > priority
            and (other, step, None) not in self._chains
            and self._turns_begun.get(other, 0) <= begun
            for other, step in self._turn_steps
        )

    def _widen(
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
        them: the whole gang then runs at the shared devices' pace, so look-ahead takes them
        only when the extra devices more than make up for it."""
        node = task.node
        key = (task.pipeline_id, node.step, None)
        if node.worker is not None or not task.devices or task.share < 1.0 or node.kind is SubStageKind.LOAD:
            return task
        if self._chains.get(key) != task.devices or self._widened.get(key):
            return task
        base = len(task.devices)
        chain_s = _ready_chain_s(view, task)
        extra: list[int] = []
        for d in range(view.num_devices):
            if len(extra) == base:
                break
            if load.get(d, 0.0) > EPS or d in task.devices:
                continue
            wide_s = chain_s * base / (base + len(extra) + 1)
            if not self.options.lookahead or self._lendable_for(view, owner.get(d), wide_s, d):
                extra.append(d)
        shared = self._tail_devices_to_share(
            view, task, base + len(extra), 2 * base - base - len(extra), load, owner, on_device
        )
        if not extra and not shared:
            return task
        devices = tuple(sorted(task.devices + tuple(extra) + tuple(shared)))
        share, elastic = (1.0 - self.options.tail_share, True) if shared else (1.0, False)
        for d in devices:
            load[d] = (load.get(d, 0.0) if d in shared else 0.0) + share
            self._resident[d] = {task.pipeline_id} | (
                {t.pipeline_id for t in on_device.get(d, [])} if d in shared else set()
            )
        self._chains[key] = devices
        self._widened[key] = True
        spec = view.specs[task.pipeline_id]
        switch = self._cost.context_switch_s(spec.model, num_gpus=len(devices), training=True)
        return replace(
            task,
            node=_widened(node, len(devices)),
            devices=devices,
            share=share,
            elastic=elastic,
            setup_s=max(task.setup_s, switch),
        )

    def _tail_devices_to_share(
        self,
        view: ClusterView,
        task: Task,
        width: int,
        room: int,
        load: dict[int, float],
        owner: dict[int, str],
        on_device: dict[int, list[Task]],
    ) -> list[int]:
        if not self.options.colocate or self.options.rollout_only or room <= 0:
            return []
        node = task.node
        candidates = [
            d
            for d in range(view.num_devices)
            if d not in task.devices
            and abs(load.get(d, 0.0) - self.options.tail_share) < EPS
            and len(on := on_device.get(d, [])) == 1
            and _is_tail(on[0].node)
            and on[0].node.mem_bytes + node.mem_bytes * node.devices / (width + room) <= self._capacity
        ][:room]
        if not self.options.lookahead or not candidates:
            return candidates
        # Roll forward: the chain on `width` devices at full speed, or on width + k at the shared pace.
        slow_c, slow_m = self._slowdowns()
        chain_s = _ready_chain_s(view, task)
        k = len(candidates)
        alone_s, shared_s = chain_s * node.devices / width, chain_s * node.devices * slow_c / (width + k)
        if not all(self._lendable_for(view, owner.get(d), shared_s, d) for d in candidates):
            return []  # the chain would still hold a device when its owner's training wants it
        owners = {t.pipeline_id for d in candidates for t in on_device.get(d, [])}
        tails_left = max(view.rollout_done_s.get(o, 0.0) for o in owners) - view.now_s
        loss_ds = self._owners_loss_ds(view, owners, min(shared_s, tails_left * slow_m))
        if loss_ds is None or (alone_s - shared_s) * (width + k) <= loss_ds:
            return []
        return candidates

    def _lendable_for(self, view: ClusterView, owner: str | None, chain_s: float, device: int) -> bool:
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
        if owner in self._rollout_part and device in self._home[owner][: self._rollout_part[owner]]:
            if step_s is None:
                return True
            # A loan outlasting the owner's remaining steps leaves all of them generating on its
            # training part, behind its own updates (random mix 1: an 825 s loan predicted, 1,750 s
            # taken, held a 1.5B job of 30 s steps to one device; refused, the 14B borrower ended sooner).
            done, total = view.progress.get(owner, (0, view.specs[owner].total_steps))
            return chain_s <= (total - done) * step_s
        slack_steps = view.specs[owner].staleness - 1 if owner in view.specs else 0
        if slack_steps > 0 and step_s is not None:  # rollouts run steps ahead: its training may wait a little
            return chain_s <= slack_steps * step_s
        # No step of the owner's finished yet (or no slack): it wants the device when its rollout ends.
        if owner not in view.rollout_done_s:
            return False  # between rollout and training: it wants its devices now
        return view.now_s + chain_s <= view.rollout_done_s[owner]

    def release(self, pipeline_id: str) -> None:
        self._chains = {k: v for k, v in self._chains.items() if k[0] != pipeline_id}
        for pids in self._resident.values():
            pids.discard(pipeline_id)
        self._home.pop(pipeline_id, None)
        self._arrival.pop(pipeline_id, None)
        self._rollout_part.pop(pipeline_id, None)
        self._profile.pop(pipeline_id, None)
        self._step_began.pop(pipeline_id, None)
        self._step_start = {k: v for k, v in self._step_start.items() if k[0] != pipeline_id}
        self._turn_steps = {k: v for k, v in self._turn_steps.items() if k[0] != pipeline_id}
        self._turns_begun.pop(pipeline_id, None)

    def _forget_finished_chains(self, view: ClusterView) -> None:
        live = {(s.pipeline_id, s.node.step) for s in view.ready} | {(t.pipeline_id, t.node.step) for t in view.running}
        self._chains = {k: v for k, v in self._chains.items() if (k[0], k[1]) in live}
        self._widened = {k: v for k, v in self._widened.items() if k in self._chains}
        self._turn_steps = {  # steps trained already are done with their turns
            k: v for k, v in self._turn_steps.items() if k[1] >= view.progress.get(k[0], (0, 0))[0]
        }

    def _order(self, view: ClusterView) -> list[ReadyStage]:
        """Chains already placed continue first (their devices hold their state), then new
        training chains (they unblock a pipeline's next step), then new rollout workers;
        within each, pipelines by rank."""
        rank = self._pipeline_rank(view)

        def key(stage: ReadyStage) -> tuple[int, int, int]:
            chain = (stage.pipeline_id, stage.node.step, stage.node.worker)
            group = 0 if chain in self._chains else (1 if stage.node.worker is None else 2)
            return (group, rank[stage.pipeline_id], stage.node.step)

        return sorted(view.ready, key=key)

    def _pipeline_rank(self, view: ClusterView) -> dict[str, int]:
        """Longest projected remaining time first (what ends last decides the makespan), each
        pipeline's time weighted by its priority, as the resize projection weighs it; where
        that ties (no step observed yet), higher priority first."""

        def remaining_s(pid: str) -> float:
            done, total = view.progress.get(pid, (0, view.specs[pid].total_steps))
            return -(total - done) * view.recent_step_s.get(pid, math.inf) * view.specs[pid].priority

        if self.options.lookahead:
            order = sorted(view.specs, key=lambda p: (remaining_s(p), -view.specs[p].priority, self._arrival.get(p, 0)))
        else:
            order = sorted(view.specs, key=lambda p: self._arrival.get(p, 0))
        return {pid: i for i, pid in enumerate(order)}

    def _choose(
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
        home = set(self._part(view, pid, training=node.worker is None))

        def usable(d: int) -> bool:
            if not self._fits_beside(pid, node, d, load, on_device):
                return False
            if d in home:
                return True
            return node.worker is not None and self._lendable(view, stage, owner.get(d), d)

        def preference(d: int) -> tuple[int, int, int, int]:
            return (
                0 if d in home else 1,
                1 if load.get(d, 0.0) > EPS else 0,
                0 if pid in self._resident.get(d, ()) else 1,
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
        if chosen is not None:
            return chosen
        away = sorted((d for d in range(view.num_devices) if d not in home and usable(d)), key=preference)
        return first_fit(at_home + away)

    def _part(self, view: ClusterView, pid: str, *, training: bool) -> tuple[int, ...]:
        """The home, or for a disaggregated pipeline its rollout or its training part."""
        home = self._home[pid]
        split = self._rollout_part.get(pid)
        if split is None:
            return home
        return home[split:] if training else home[:split]

    def _lendable(self, view: ClusterView, stage: ReadyStage, owner: str | None, device: int) -> bool:
        """May ``stage``'s chain borrow ``device`` of ``owner``'s home?"""
        if not self.options.lookahead:
            return True
        return self._lendable_for(view, owner, stage.chain_s, device)

    def _fits_beside(
        self,
        pid: str,
        node: SubStage,
        device: int,
        load: dict[int, float],
        on_device: dict[int, list[Task]],
        continuing: bool = False,
    ) -> bool:
        """Can ``node`` run on ``device`` now: free, or (dynamic split) beside one tail decode
        with room in memory for both. New co-location is for training chains (the canonical
        complement of a tail); a chain already sharing its devices may go on sharing them."""
        used = load.get(device, 0.0)
        if used < EPS:
            return True
        if not self.options.colocate or _is_tail(node):
            return False
        others = on_device.get(device, [])
        if node.worker is not None and not continuing:
            # Continuous generation (async pipelines): a worker's next step starts beside its tail.
            if not (len(others) == 1 and others[0].pipeline_id == pid and others[0].node.step == node.step - 1):
                return False
        elif self.options.rollout_only or (not continuing and node.resource is not ResourceClass.COMPUTE):
            return False
        return (
            len(others) == 1
            and _is_tail(others[0].node)
            and abs(used - self.options.tail_share) < EPS
            and others[0].node.mem_bytes + node.mem_bytes <= self._capacity
        )

    def _fit(
        self,
        view: ClusterView,
        stage: ReadyStage,
        devices: tuple[int, ...],
        load: dict[int, float],
        on_device: dict[int, list[Task]],
    ) -> tuple[float, bool] | None:
        """(share, elastic) on ``devices``, or None if they cannot take ``node`` now."""
        node = stage.node
        continuing = (stage.pipeline_id, node.step, node.worker) in self._chains
        if any(not self._fits_beside(stage.pipeline_id, node, d, load, on_device, continuing) for d in devices):
            return None
        if _is_tail(node) and self.options.colocate:
            return self.options.tail_share, False  # leaves room for a compute co-runner
        busy = sum(1 for d in devices if load.get(d, 0.0) > EPS)
        if busy == 0:
            return 1.0, False
        if not continuing:  # a chain already sharing its devices goes on sharing them
            if busy < len(devices):
                return None  # a gang runs at its slowest device's pace: all beside tails, or wait for all free
            if self.options.lookahead and not self._split_pays(view, stage, devices, on_device):
                return None
        return 1.0 - self.options.tail_share, True  # beside tails; the whole device once they end

    def _slowdowns(self) -> tuple[float, float]:
        """(compute beside a tail, tail beside compute) at the split, from the interference table."""
        tail, rest = self.options.tail_share, 1.0 - self.options.tail_share
        table = self._interference
        return table.slowdown("compute", rest, "memory", tail), table.slowdown("memory", tail, "compute", rest)

    def _owners_loss_ds(self, view: ClusterView, owners: set[str], shared_s: float) -> float | None:
        """Device-seconds the tails' owners lose while their tails run slower for ``shared_s``:
        a tail is the last thing before its owner's training, so a late tail holds back every
        device of the owner's home. None when an owner's rollout end cannot be predicted."""
        if any(o not in view.rollout_done_s for o in owners):
            return None
        _, slow_m = self._slowdowns()
        return sum(shared_s * (1.0 - 1.0 / slow_m) * len(self._home.get(o, ())) for o in owners)

    def _split_pays(
        self, view: ClusterView, stage: ReadyStage, devices: tuple[int, ...], on_device: dict[int, list[Task]]
    ) -> bool:
        """Roll both sides forward on predicted durations: the chain started beside the tails
        now against started when they end. Worth it if the device-seconds the chain gains
        exceed those its tails' owners lose."""
        owners = {t.pipeline_id for d in devices for t in on_device.get(d, [])}
        if any(o not in view.rollout_done_s for o in owners):
            return False
        tail_left = max(view.rollout_done_s[o] for o in owners) - view.now_s
        slow_c, slow_m = self._slowdowns()
        chain = stage.chain_s
        shared_s = min(chain * slow_c, tail_left * slow_m)
        finish_co = shared_s + max(0.0, chain - shared_s / slow_c)
        gain_ds = ((tail_left + chain) - finish_co) * len(devices)
        loss_ds = self._owners_loss_ds(view, owners, shared_s)
        return loss_ds is not None and gain_ds > loss_ds

    def _switch_s(
        self,
        spec: PipelineSpec,
        pid: str,
        node: SubStage,
        devices: tuple[int, ...],
        same_chain: bool,
        on_device: dict[int, list[Task]],
    ) -> float:
        cold = not same_chain and any(pid not in self._resident.get(d, set()) for d in devices)
        for d in devices:  # what runs there stays resident; anything else is parked to host memory
            self._resident[d] = {pid} | {t.pipeline_id for t in on_device.get(d, [])}
        if not cold:
            return 0.0
        return self._cost.context_switch_s(spec.model, num_gpus=len(devices), training=node.worker is None)


def _min_width(asked: ResourceSpec) -> int:
    """Fewest devices a home may shrink to: one rollout worker, and for a disaggregated
    pipeline a training part beside it."""
    return asked.tp if asked.rollout_gpus is None else 2 * asked.tp


def _ready_chain_s(view: ClusterView, task: Task) -> float:
    """The predicted chain length of the ready stage ``task`` was made from."""
    for stage in view.ready:
        if stage.pipeline_id == task.pipeline_id and stage.node.node_id == task.node.node_id:
            return stage.chain_s
    return task.node.duration_s


def _widened(node: SubStage, width: int) -> SubStage:
    """``node`` data-parallel over ``width`` devices: log-probs and updates scale with the
    devices (as the cost model's ``train_s``), the weight broadcast does not; state per device shrinks."""
    scale = node.devices / width
    duration = node.duration_s if node.kind is SubStageKind.WEIGHT_SYNC else node.duration_s * scale
    return replace(node, devices=width, duration_s=duration, mem_bytes=node.mem_bytes * scale)


def jigsaw_resources(spec: PipelineSpec, pool_split: Callable[[PipelineSpec], PipelineSpec]) -> PipelineSpec:
    """Sync pipelines run colocated at home; async ones on the rollout/training split that
    ``pool_split`` finds best for them alone (their one-step lag overlaps the two)."""
    if spec.mode is SyncMode.ASYNC:
        return pool_split(spec)
    return replace(spec, resources=ResourceSpec(num_gpus=spec.resources.num_gpus, tp=spec.resources.tp))
