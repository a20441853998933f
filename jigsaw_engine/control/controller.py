"""The Controller: pipelines in, events out, on one clock.

It is driven from outside by ``advance_to(now_s)``: in tests and benchmarks by a virtual clock
(deterministic, instant), in the service by :class:`~jigsaw_engine.control.local_engine.LocalEngine`
pacing the same clock against wall time. Placement here is the dedicated-partition baseline:
each pipeline gets ``resources.num_gpus`` devices of its own, first come first served, and
runs step after step on them.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jigsaw_engine.contracts import EngineEvent, EventKind, PipelineState
from jigsaw_engine.control.event_log import EventLog
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.errors import (
    DuplicatePipelineError,
    FieldError,
    SpecError,
    UnknownPipelineError,
)
from jigsaw_engine.sim.step_sim import StepResult, simulate_step
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec

logger = logging.getLogger(__name__)

STARTUP_S = 20.0
"""Simulated time from placement to the first rollout: loading weights, starting workers."""


@dataclass(slots=True)
class _Pipeline:
    pipeline_id: str
    spec: PipelineSpec
    state: PipelineState = PipelineState.QUEUED
    step: int = 0
    devices: int = 0
    generation: int = 0
    """Bumped on cancel so stale timer entries for this pipeline are ignored."""
    current_step: StepResult | None = None


@dataclass(order=True, slots=True)
class _Timer:
    time_s: float
    seq: int
    pipeline_id: str = field(compare=False)
    action: str = field(compare=False)
    generation: int = field(compare=False)


def check_fits_cluster(spec: PipelineSpec, cluster: ClusterSpec) -> list[FieldError]:
    if spec.resources.num_gpus > cluster.num_devices:
        return [
            FieldError(
                "resources.num_gpus",
                f"must be <= {cluster.num_devices} (the cluster's devices), got {spec.resources.num_gpus}",
            )
        ]
    return []


class Controller:
    def __init__(self, cluster: ClusterSpec, cost: RooflineCostModel) -> None:
        self.cluster = cluster
        self.cost = cost
        self.events = EventLog()
        self._pipelines: dict[str, _Pipeline] = {}
        self._queue: list[str] = []
        self._timers: list[_Timer] = []
        self._timer_seq = 0
        self._free_devices = cluster.num_devices
        self._now_s = 0.0

    # -- inputs ------------------------------------------------------------------------
    def submit(self, pipeline_id: str, raw_spec: Mapping[str, Any], now_s: float) -> None:
        if pipeline_id in self._pipelines:
            raise DuplicatePipelineError(pipeline_id)
        spec = parse_pipeline_spec(raw_spec)
        problems = check_fits_cluster(spec, self.cluster)
        if problems:
            raise SpecError(problems)
        self._now_s = max(self._now_s, now_s)
        self._pipelines[pipeline_id] = _Pipeline(pipeline_id, spec)
        self._queue.append(pipeline_id)
        self._emit_status(pipeline_id, PipelineState.QUEUED, "waiting for devices")
        self._place_queued()

    def cancel(self, pipeline_id: str, now_s: float) -> bool:
        p = self._pipelines.get(pipeline_id)
        if p is None:
            raise UnknownPipelineError(pipeline_id)
        if p.state.is_terminal:
            return False
        self._now_s = max(self._now_s, now_s)
        if p.state is PipelineState.QUEUED:
            self._queue.remove(pipeline_id)
        self._finish(p, PipelineState.CANCELLED, "cancelled by request")
        return True

    def knows(self, pipeline_id: str) -> bool:
        return pipeline_id in self._pipelines

    # -- clock -------------------------------------------------------------------------
    def next_event_time(self) -> float | None:
        return self._timers[0].time_s if self._timers else None

    def advance_to(self, now_s: float) -> None:
        """Run every timer due at or before ``now_s``, in (time, sequence) order."""
        while self._timers and self._timers[0].time_s <= now_s:
            timer = heapq.heappop(self._timers)
            self._now_s = timer.time_s
            p = self._pipelines[timer.pipeline_id]
            if timer.generation != p.generation or p.state.is_terminal:
                continue
            if timer.action == "start":
                self._start_running(p)
            elif timer.action == "step":
                self._step_done(p)
        self._now_s = max(self._now_s, now_s)

    def run_until_idle(self, max_time_s: float = float("inf")) -> float:
        """Virtual-clock driver: jump from timer to timer until none are left."""
        while (t := self.next_event_time()) is not None and t <= max_time_s:
            self.advance_to(t)
        return self._now_s

    # -- reads -------------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        """The controller's clock: the time of the last event it processed (or was told)."""
        return self._now_s

    def state_of(self, pipeline_id: str) -> PipelineState:
        return self._pipelines[pipeline_id].state

    def describe(self) -> dict[str, Any]:
        by_state: dict[str, int] = {}
        for p in self._pipelines.values():
            by_state[p.state.value] = by_state.get(p.state.value, 0) + 1
        return {
            "cluster": {
                "device_type": self.cluster.device_type,
                "num_devices": self.cluster.num_devices,
                "devices_in_use": self.cluster.num_devices - self._free_devices,
            },
            "pipelines": by_state,
            "clock_s": self._now_s,
        }

    # -- transitions -------------------------------------------------------------------
    def _place_queued(self) -> None:
        placed: list[str] = []
        for pid in self._queue:
            p = self._pipelines[pid]
            if p.spec.resources.num_gpus > self._free_devices:
                break  # strict arrival order: no job overtakes an earlier one
            self._free_devices -= p.spec.resources.num_gpus
            p.devices = p.spec.resources.num_gpus
            placed.append(pid)
            self._set_state(p, PipelineState.STARTING, f"placed on {p.devices} devices")
            self._add_timer(self._now_s + STARTUP_S, p, "start")
        for pid in placed:
            self._queue.remove(pid)

    def _start_running(self, p: _Pipeline) -> None:
        self._set_state(p, PipelineState.RUNNING, "training")
        self._schedule_next_step(p)

    def _schedule_next_step(self, p: _Pipeline) -> None:
        try:
            p.current_step = simulate_step(self.cost, p.spec, p.step)
        except Exception as exc:  # a pipeline's failure must not stop the others
            logger.exception("pipeline %s failed at step %d", p.pipeline_id, p.step)
            self._finish(p, PipelineState.FAILED, f"system: {type(exc).__name__}: {exc}")
            return
        self._add_timer(self._now_s + p.current_step.duration_s, p, "step")

    def _step_done(self, p: _Pipeline) -> None:
        result = p.current_step
        assert result is not None
        p.step += 1
        self.events.append(
            p.pipeline_id,
            EventKind.METRICS,
            self._now_s,
            {"step": p.step, "total_steps": p.spec.total_steps, "metrics": result.metrics()},
        )
        if p.step >= p.spec.total_steps:
            self._finish(p, PipelineState.SUCCEEDED, f"completed {p.step} steps")
        else:
            self._schedule_next_step(p)

    def _finish(self, p: _Pipeline, state: PipelineState, reason: str) -> None:
        p.generation += 1
        self._free_devices += p.devices
        p.devices = 0
        self._set_state(p, state, reason)
        self._place_queued()

    def _set_state(self, p: _Pipeline, state: PipelineState, reason: str) -> None:
        p.state = state
        self._emit_status(p.pipeline_id, state, reason)

    def _emit_status(self, pipeline_id: str, state: PipelineState, reason: str) -> EngineEvent:
        p = self._pipelines[pipeline_id]
        logger.info("pipeline %s -> %s (%s)", pipeline_id, state.value, reason)
        return self.events.append(
            pipeline_id,
            EventKind.STATUS,
            self._now_s,
            {
                "status": state.value,
                "reason": reason,
                "step": p.step,
                "total_steps": p.spec.total_steps,
            },
        )

    def _add_timer(self, time_s: float, p: _Pipeline, action: str) -> None:
        self._timer_seq += 1
        heapq.heappush(self._timers, _Timer(time_s, self._timer_seq, p.pipeline_id, action, p.generation))
