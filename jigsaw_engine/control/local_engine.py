"""``LocalEngine``: the cluster controller in a background thread, its clock paced against wall time.

``speed`` is simulated seconds per wall second: 1.0 runs in real time, larger values
fast-forward (demos, tests), ``math.inf`` jumps straight from event to event.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from jigsaw_engine.contracts import EventBatch, PipelineState
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.sched.registry import graph_config_for, make_scheduler, real_graph_config_for
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from jigsaw_engine.tasks import Runtime

logger = logging.getLogger(__name__)

STARTUP_S = 20.0
"""Simulated time from placement to the first rollout: loading weights, starting workers."""
TIMELINE_KEPT_S = 3600.0
"""Engine seconds of past the engine keeps: the cluster page's longest window (1 h)."""
ENDED_RUN_KEPT_WALL_S = 120.0
"""Wall seconds, at the least, that an ended run stays known. The control plane pumps events
every second and reconciles every 10 s; on top of this, a run is forgotten only once the pump
has stored its last event (see ``ClusterController``)."""


def retention_s(speed: float) -> float | None:
    """Engine seconds of ended work a long-running engine keeps: the timeline's window, or
    ``ENDED_RUN_KEPT_WALL_S`` of wall time at ``speed`` if that is longer (a fast clock). At
    infinite speed engine time says nothing of wall time: the timeline's window, and the read
    gate alone keeps the reconciler safe (only tests and demos run that fast)."""
    if math.isinf(speed):
        return TIMELINE_KEPT_S
    return max(TIMELINE_KEPT_S, ENDED_RUN_KEPT_WALL_S * speed)


class RealBackend(Protocol):
    """Real work behind the controller (``runtime.service_executor.ServiceBackend``): the
    runtime, where a submitted spec goes, and what each step really measured."""

    poll_s: float
    runtime: Runtime

    def register(self, pipeline_id: str, spec: PipelineSpec) -> None: ...

    def step_report(self, pipeline_id: str, step: int) -> tuple[dict[str, float], list[dict[str, Any]]] | None: ...

    def close(self) -> None: ...


class LocalEngine:
    """An :class:`~jigsaw_engine.contracts.EngineHost` running in this process: simulated
    pipelines paced at ``speed``, or, with ``real``, real ones on the wall clock."""

    def __init__(
        self, cluster: ClusterSpec, *, speed: float = 1.0, scheduler: str = "jigsaw", real: RealBackend | None = None
    ) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        if real is not None and speed != 1.0:
            raise ValueError(f"real pipelines run on the wall clock: speed must be 1.0, got {speed}")
        self._engine_id = uuid.uuid4().hex
        self._speed = speed
        self._real = real
        cost = RooflineCostModel(load_device_profile(cluster.device_type))
        # Real jobs plan with the real graph options, and their torch rollout engines prefill
        # each turn's whole conversation (no prefix cache).
        graph_config = (
            replace(real_graph_config_for(scheduler), prefix_cache=False)
            if real is not None
            else graph_config_for(scheduler)
        )
        self._controller = ClusterController(
            cluster,
            cost,
            runtime=real.runtime if real is not None else None,
            scheduler=make_scheduler(scheduler, cluster, cost, real_pipelines=real is not None),
            graph_config=replace(graph_config, startup_s=STARTUP_S),
            step_reports=real.step_report if real is not None else None,
            estimate_verl=True,  # the cluster page's "throughput vs verl (estimated)"
            retain_ended_s=retention_s(speed),  # this engine runs for ever: keep only the recent past
        )
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._wall_origin = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="jigsaw-engine", daemon=True)
        self._thread.start()

    @property
    def engine_id(self) -> str:
        return self._engine_id

    def submit(self, pipeline_id: str, spec: Mapping[str, Any]) -> None:
        with self._lock:
            if self._controller.knows(pipeline_id):
                # Idempotent: a retried dispatch must not start the pipeline twice; a paused
                # one continues from its checkpoint.
                if self._controller.state_of(pipeline_id) is PipelineState.PAUSED:
                    self._advance()
                    self._controller.resume(pipeline_id)
                    self._wake.set()
                return
            self._advance()
            if self._real is not None:
                self._real.register(pipeline_id, parse_pipeline_spec(spec))
            self._controller.submit(pipeline_id, spec)
        self._wake.set()

    def cancel(self, pipeline_id: str) -> bool:
        with self._lock:
            if not self._controller.knows(pipeline_id):
                return False
            self._advance()
            cancelled = self._controller.cancel(pipeline_id)
        self._wake.set()
        return cancelled

    def pause(self, pipeline_id: str) -> bool:
        with self._lock:
            if not self._controller.knows(pipeline_id):
                return False
            self._advance()
            paused = self._controller.pause(pipeline_id)
        self._wake.set()
        return paused

    def events_since(self, cursor: int, limit: int = 1000) -> EventBatch:
        with self._lock:
            events = self._controller.events.since(cursor, limit)
        next_cursor = events[-1].seq if events else cursor
        return EventBatch(self._engine_id, events, next_cursor)

    def pipeline_states(self) -> dict[str, str]:
        with self._lock:
            return self._controller.pipeline_states()

    def timeline(self, window_s: float) -> dict[str, Any]:
        with self._lock:
            return self._controller.timeline_window(window_s)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            info = self._controller.describe()
        info["engine_id"] = self._engine_id
        info["speed"] = None if math.isinf(self._speed) else self._speed  # JSON has no infinity
        return info

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)
        if self._real is not None:
            self._real.close()

    # -- the pacing loop ---------------------------------------------------------------
    def _now_s(self) -> float:
        if math.isinf(self._speed) or self._real is not None:  # real: the runtime's wall clock
            return self._controller.now_s
        return (time.monotonic() - self._wall_origin) * self._speed

    def _advance(self) -> None:
        """Bring the controller up to now (with infinite speed: through every pending event)."""
        if math.isinf(self._speed):
            self._controller.run_until_idle()
        else:
            self._controller.advance_to(self._now_s())

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._lock:
                    self._advance()
                    nxt = self._controller.next_event_time()
                    wait_s = 1.0 if nxt is None or math.isinf(self._speed) else (nxt - self._now_s()) / self._speed
            except Exception:  # the engine thread must outlive one bad pipeline
                logger.exception("engine loop failed; continuing")
                wait_s = 1.0
            # Real sub-stages finish when they finish, not when predicted: look often.
            longest = self._real.poll_s if self._real is not None else 1.0
            self._wake.wait(timeout=min(max(wait_s, 0.0), longest))
            self._wake.clear()
