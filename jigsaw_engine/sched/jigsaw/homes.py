"""Homes and resizing: which devices each pipeline's chains start on, and how many.

A home is taken first come, first served at the size asked for, and resized at every step:
the pipelines still running take over the devices of those that ended. With the look-ahead a
home is sized to bring in the latest projected completion (:mod:`.projection`, from each
pipeline's observed steps), then moved so that a higher priority is projected the lower
latency ratio; without it homes grow in proportion to what was asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Mapping
from dataclasses import replace

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.sched.jigsaw.common import ChainKey, JigsawOptions
from jigsaw_engine.sched.jigsaw.projection import Demand, StepProfile, balanced_widths, fair_floor, priority_ordered
from jigsaw_engine.sched.protocol import ClusterView
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec, SyncMode

PROFILE_ALPHA = 0.5
"""Weight of the newest step in a pipeline's step profile (look-ahead resize)."""
MAX_RESIZE_FACTOR = 2
"""A look-ahead resize at most doubles or halves a home per step: the step profile is measured
at one width (one step's sampling noise in it), and a rollout on far fewer workers is slower
than the profile says. A pipeline running alone grows at once: the devices a cap would keep
from it serve no one, while its profile projects each of them to shorten its step."""
MIN_SHRINK_GAIN = 0.05
"""A look-ahead resize shrinks a home only if that brings the latest projected completion in
by at least this fraction."""


class Homes:
    """Each admitted pipeline's home, admission order and observed step profile."""

    def __init__(self, cost: RooflineCostModel, options: JigsawOptions) -> None:
        self.options = options
        self._cost = cost
        self.home: dict[str, tuple[int, ...]] = {}
        self._arrival: dict[str, int] = {}
        """Admission order of the pipelines held (a counter, so forgetting one never reuses a number)."""
        self._admitted = 0
        self.rollout_part: dict[str, int] = {}
        """Disaggregated pipelines (async, with ``rollout_gpus``): devices of the home that generate."""
        self._step_start: dict[tuple[str, int], float] = {}
        """When each open step's first rollout sub-stage started."""
        self._step_began: dict[str, tuple[int, float]] = {}
        """(step, time) each pipeline's newest step began generating."""
        self.profiles: dict[str, StepProfile] = {}
        """Each pipeline's observed steps, smoothed (the look-ahead resize's projection)."""

    def admit(self, view: ClusterView, specs: Mapping[str, PipelineSpec]) -> list[str]:
        """First come, first served homes of the size asked for (no job overtakes another)."""
        admitted = []
        for pid in view.queued:
            free = self._unowned(view)
            need = specs[pid].resources.num_gpus
            if need > len(free):
                break
            self.home[pid] = tuple(free[:need])
            self._arrival[pid] = self._admitted
            self._admitted += 1
            admitted.append(pid)
        return admitted

    def _unowned(self, view: ClusterView) -> list[int]:
        owned = {d for home in self.home.values() for d in home}
        return [d for d in view.usable() if d not in owned]

    def owners(self) -> dict[int, str]:
        """The pipeline whose home each owned device is in."""
        return {d: pid for pid, home in self.home.items() for d in home}

    def part(self, pid: str, *, training: bool) -> tuple[int, ...]:
        """The home, or for a disaggregated pipeline its rollout or its training part."""
        home = self.home[pid]
        split = self.rollout_part.get(pid)
        if split is None:
            return home
        return home[split:] if training else home[:split]

    def resize(self, view: ClusterView, pipeline_id: str, step: int) -> ResourceSpec:
        """The step's width: the home, grown from devices nobody owns when resizing, and back to
        what was asked for while another pipeline waits for admission. With look-ahead a home
        may also shrink, to hand devices to the pipeline projected to finish last."""
        asked = view.specs[pipeline_id].resources
        home = self.home[pipeline_id]
        if any(d in view.lost for d in home):
            # What is left of it (a lost node's devices come back unowned); a home lost whole
            # starts again on devices nobody owns, if any.
            kept = tuple(d for d in home if d not in view.lost)
            self.home.pop(pipeline_id)
            home = self.home[pipeline_id] = kept or tuple(self._unowned(view)[: _min_width(asked)]) or home
        if view.queued and len(home) > asked.num_gpus:
            home = self.home[pipeline_id] = home[: asked.num_gpus]
        elif self.options.resize and not view.queued and pipeline_id in view.recent_step_s:
            # Grow from the second step on: a pipeline arriving meanwhile finds devices at once.
            target = self._target_width(view, pipeline_id, step)
            if self.options.lookahead and pipeline_id in self.profiles:
                low = max(_min_width(asked), len(home) // MAX_RESIZE_FACTOR // asked.tp * asked.tp)
                target = max(target, low)
                if len(view.specs) > 1:  # alone, it grows at once (MAX_RESIZE_FACTOR)
                    target = min(target, MAX_RESIZE_FACTOR * len(home))
                # Only a sync pipeline shrinks: it is between steps now. An async one may have an
                # earlier step still to train on the devices it was built for.
                if target < len(home) and view.specs[pipeline_id].mode is SyncMode.SYNC:
                    home = self.home[pipeline_id] = home[:target]
            spare = self._unowned(view)
            grow = max(0, min(target - len(home), len(spare)))
            grow -= (len(home) + grow) % asked.tp
            if grow > 0:
                home = home + tuple(spare[:grow])
                self.home[pipeline_id] = home
        width = len(home) // asked.tp * asked.tp
        if asked.rollout_gpus is None:
            return ResourceSpec(num_gpus=width, tp=asked.tp)
        # Keep the pools' proportions as the home grows.
        rollout = asked.rollout_gpus * width // asked.num_gpus // asked.tp * asked.tp
        rollout = min(max(asked.tp, rollout), width - 1)
        self.rollout_part[pipeline_id] = rollout
        return ResourceSpec(num_gpus=width, tp=asked.tp, rollout_gpus=rollout)

    def _target_width(self, view: ClusterView, pipeline_id: str, step: int) -> int:
        """Lookahead, a pipeline whose last step was observed: the width that brings in the
        latest projected completion (:func:`balanced_widths`). Lookahead otherwise: a share of
        the cluster in proportion to projected remaining work (steps left x recent step latency
        x width). Greedy: in proportion to what each asked for."""
        if self.options.lookahead and pipeline_id in self.profiles:
            return self._balanced(view, pipeline_id, step)

        def remaining(pid: str) -> float:
            done, total = view.progress.get(pid, (0, 1))
            step_s = view.recent_step_s.get(pid)
            if not self.options.lookahead or step_s is None:
                return float(view.specs[pid].resources.num_gpus)
            return (total - done) * step_s * len(self.home[pid])

        work = {pid: remaining(pid) for pid in view.specs}
        return math.floor(view.num_devices * work[pipeline_id] / (sum(work.values()) or 1.0))

    def _balanced(self, view: ClusterView, pipeline_id: str, step: int) -> int:
        demands: dict[str, Demand] = {}
        for pid, spec in view.specs.items():
            done, total = view.progress.get(pid, (0, spec.total_steps))
            asked, profile = spec.resources, self.profiles.get(pid)
            floor = _min_width(asked)
            steps_left = float(total - (step if pid == pipeline_id else done))
            if profile is not None:
                floor = max(floor, fair_floor(profile, asked.num_gpus, asked.tp, self.options.max_slowdown))
                began = self._step_began.get(pid)
                if pid != pipeline_id and began is not None and began[0] == done:
                    # Part of its current step is behind it (never counted as all of it: it may run late).
                    elapsed = (view.now_s - began[1]) / profile.step_s(len(self.home[pid]))
                    steps_left -= min(0.9, elapsed)
            demands[pid] = Demand(
                steps_left=steps_left,
                profile=profile,
                width=len(self.home[pid]),
                floor=floor,
                tp=asked.tp,
                priority=spec.priority,
                asked=asked.num_gpus,
            )
        widths = balanced_widths(demands, view.num_devices)
        ordered = priority_ordered(demands, widths, view.num_devices)
        home = len(self.home[pipeline_id])
        if widths[pipeline_id] >= home or ordered[pipeline_id] != widths[pipeline_id]:
            return ordered[pipeline_id]

        def latest(w: Mapping[str, int]) -> float:
            return max(d.remaining_s(w[pid]) for pid, d in demands.items())

        # Shrink only for a real gain: moving devices between pipelines projected to end about
        # together only trades one's noise for the other's (and costs context switches).
        now = {pid: d.width for pid, d in demands.items()}
        return widths[pipeline_id] if latest(widths) < (1 - MIN_SHRINK_GAIN) * latest(now) else home

    def rollout_started(self, pid: str, step: int, now_s: float) -> None:
        """A rollout sub-stage of ``step`` was placed: the step's rollout has begun by now."""
        if (pid, step) not in self._step_start:
            self._step_start[(pid, step)] = now_s
            if self._step_began.get(pid, (-1, 0.0))[0] < step:
                self._step_began[pid] = (step, now_s)

    def observe(self, view: ClusterView, placed: Container[ChainKey]) -> None:
        """Profile each pipeline's step as its training becomes ready (its chain not ``placed``
        yet): the rollout's wall time so far plus the weight sync are serial, the training
        chain's device-seconds scale."""
        now = view.now_s
        stale = [k for k in self._step_start if k[1] < view.progress.get(k[0], (0, 0))[0]]
        for key in stale:  # steps trained already (an async worker may start one after its training)
            del self._step_start[key]
        for stage in view.ready:
            pid, node = stage.pipeline_id, stage.node
            if node.worker is not None or node.devices == 0 or (pid, node.step, None) in placed:
                continue
            started = self._step_start.pop((pid, node.step), None)
            if started is None:
                continue
            spec = view.specs[pid]
            sync_s = self._cost.weight_sync_s(spec.model)
            # Per device of the whole home: a disaggregated home trains on its training part only.
            home = len(self.home[pid])
            per_home = home / max(1, home - self.rollout_part.get(pid, 0))
            lag = spec.staleness if spec.mode is SyncMode.ASYNC else 0
            seen = StepProfile(
                now - started + sync_s, max(0.0, stage.chain_s - sync_s) * node.devices * per_home, lag, sync_s
            )
            last = self.profiles.get(pid)
            if last is not None:  # one step's sampling noise averaged out, as the graph predictor does
                a = PROFILE_ALPHA
                seen = StepProfile(
                    a * seen.serial_s + (1 - a) * last.serial_s,
                    a * seen.scalable_gpu_s + (1 - a) * last.scalable_gpu_s,
                    lag,
                    sync_s,
                )
            self.profiles[pid] = seen

    def rank(self, view: ClusterView) -> dict[str, int]:
        """Longest projected remaining time first (what ends last decides the makespan), each
        pipeline's time weighted by its priority, as the resize projection weighs it; where
        that ties (no step observed yet), higher priority first. Greedy: arrival order."""

        def remaining_s(pid: str) -> float:
            done, total = view.progress.get(pid, (0, view.specs[pid].total_steps))
            return -(total - done) * view.recent_step_s.get(pid, math.inf) * view.specs[pid].priority

        if self.options.lookahead:
            order = sorted(view.specs, key=lambda p: (remaining_s(p), -view.specs[p].priority, self._arrival.get(p, 0)))
        else:
            order = sorted(view.specs, key=lambda p: self._arrival.get(p, 0))
        return {pid: i for i, pid in enumerate(order)}

    def release(self, pipeline_id: str) -> None:
        self.home.pop(pipeline_id, None)
        self._arrival.pop(pipeline_id, None)
        self.rollout_part.pop(pipeline_id, None)
        self.profiles.pop(pipeline_id, None)
        self._step_began.pop(pipeline_id, None)
        self._step_start = {k: v for k, v in self._step_start.items() if k[0] != pipeline_id}


def _min_width(asked: ResourceSpec) -> int:
    """Fewest devices a home may shrink to: one rollout worker, and for a disaggregated
    pipeline a training part beside it."""
    return asked.tp if asked.rollout_gpus is None else 2 * asked.tp


def jigsaw_resources(spec: PipelineSpec, pool_split: Callable[[PipelineSpec], PipelineSpec]) -> PipelineSpec:
    """Sync pipelines run colocated at home; async ones on the rollout/training split that
    ``pool_split`` finds best for them alone (their one-step lag overlaps the two)."""
    if spec.mode is SyncMode.ASYNC:
        return pool_split(spec)
    return replace(spec, resources=ResourceSpec(num_gpus=spec.resources.num_gpus, tp=spec.resources.tp))
