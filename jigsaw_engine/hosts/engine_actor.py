"""A detached, named Ray actor hosting the engine, and a client that speaks ``EngineHost``.

The actor outlives the process that created it, so Celery workers (short-lived, many) all
reach the one controller that owns the cluster. Events cross as plain dicts.

When the controller's process dies, Ray starts it again (``max_restarts``): it comes back
empty, with a new engine id, and the control plane's reconciler re-dispatches its jobs from
their checkpoints. Meanwhile every call raises :class:`EngineUnavailableError`, a
``ConnectionError``, which callers treat as "try again shortly".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import ray

from jigsaw_engine.contracts import EngineEvent, EventBatch
from jigsaw_engine.control.local_engine import LocalEngine
from jigsaw_engine.errors import JigsawError
from jigsaw_engine.hosts.local import EngineConfig, start_local_engine
from jigsaw_engine.spec.cluster import ClusterSpec

ACTOR_NAME = "jigsaw-engine"
NAMESPACE = "jigsaw"
HEAD_NODE_RESOURCE = "node:__internal_head__"
"""The resource Ray gives the head node alone."""


class EngineUnavailableError(JigsawError, ConnectionError):
    """The engine's actor is restarting or gone; the call may be retried."""

    code = "engine_unavailable"


@ray.remote(num_cpus=0, max_concurrency=16, max_restarts=-1)  # type: ignore[call-overload]
class EngineActor:
    """Threaded actor: calls run concurrently with the engine's own pacing thread."""

    def __init__(self, config: dict[str, Any]) -> None:
        cluster = ClusterSpec(**config.pop("cluster"))
        # Real jobs each in an actor of their own: separate cores, and a crash costs one job a step.
        self._engine: LocalEngine = start_local_engine(  # type: ignore[assignment]
            EngineConfig(cluster=cluster, **config), pipeline_actors=True
        )

    def engine_id(self) -> str:
        return self._engine.engine_id

    def submit(self, pipeline_id: str, spec: dict[str, Any]) -> None:
        self._engine.submit(pipeline_id, spec)

    def cancel(self, pipeline_id: str) -> bool:
        return self._engine.cancel(pipeline_id)

    def pause(self, pipeline_id: str) -> bool:
        return self._engine.pause(pipeline_id)

    def pipeline_states(self) -> dict[str, str]:
        return self._engine.pipeline_states()

    def timeline(self, window_s: float) -> dict[str, Any]:
        return self._engine.timeline(window_s)

    def events_since(self, cursor: int, limit: int) -> dict[str, Any]:
        batch = self._engine.events_since(cursor, limit)
        return {
            "engine_id": batch.engine_id,
            "events": [e.to_dict() for e in batch.events],
            "next_cursor": batch.next_cursor,
        }

    def describe(self) -> dict[str, Any]:
        return self._engine.describe()


class RayEngineClient:
    """``EngineHost`` backed by the named actor; creates it on first use if it is missing."""

    def __init__(self, config: EngineConfig, *, address: str | None, timeout_s: float = 30.0) -> None:
        if not ray.is_initialized():
            ray.init(
                address=address or "auto",
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        self._timeout_s = timeout_s
        self._actor_config = {
            "cluster": {
                "num_nodes": config.cluster.num_nodes,
                "devices_per_node": config.cluster.devices_per_node,
                "device_type": config.cluster.device_type,
            },
            "speed": config.speed,
            "mode": config.mode,
            "real_cache_dir": config.real_cache_dir,
            "real_checkpoint_dir": config.real_checkpoint_dir,
        }
        self._actor: Any = None
        self._engine_id: str = self.engine_id

    def _handle(self) -> Any:
        if self._actor is None:
            self._actor = EngineActor.options(  # type: ignore[attr-defined]
                name=ACTOR_NAME,
                namespace=NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                # On the head node, as Ray's own bookkeeping actors are: a worker node that
                # goes must cost the engine its devices there, never the engine itself.
                resources={HEAD_NODE_RESOURCE: 0.001},
            ).remote(dict(self._actor_config))
        return self._actor

    @property
    def engine_id(self) -> str:
        """Asked each time: a restarted engine is a new engine, with its own event sequence."""
        self._engine_id = self._get(self._handle().engine_id.remote())
        return self._engine_id

    def submit(self, pipeline_id: str, spec: Mapping[str, Any]) -> None:
        self._get(self._handle().submit.remote(pipeline_id, dict(spec)))

    def cancel(self, pipeline_id: str) -> bool:
        return bool(self._get(self._handle().cancel.remote(pipeline_id)))

    def pause(self, pipeline_id: str) -> bool:
        return bool(self._get(self._handle().pause.remote(pipeline_id)))

    def pipeline_states(self) -> dict[str, str]:
        states: dict[str, str] = self._get(self._handle().pipeline_states.remote())
        return states

    def timeline(self, window_s: float) -> dict[str, Any]:
        window: dict[str, Any] = self._get(self._handle().timeline.remote(window_s))
        return window

    def events_since(self, cursor: int, limit: int = 1000) -> EventBatch:
        raw = self._get(self._handle().events_since.remote(cursor, limit))
        return EventBatch(
            raw["engine_id"],
            [EngineEvent.from_dict(e) for e in raw["events"]],
            raw["next_cursor"],
        )

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = self._get(self._handle().describe.remote())
        return info

    def close(self) -> None:
        """Drop this client; the detached actor keeps running for other processes."""

    def shutdown_actor(self) -> None:
        ray.kill(self._handle())
        self._actor = None

    def _get(self, ref: Any) -> Any:
        try:
            return ray.get(ref, timeout=self._timeout_s)
        except ray.exceptions.RayActorError as exc:
            # Restarting (it answers again soon) or gone for good (killed without restart):
            # the next call looks the named actor up again, creating it if it is missing.
            self._actor = None
            raise EngineUnavailableError(f"the engine is restarting or unreachable: {exc}") from exc
        except ray.exceptions.GetTimeoutError as exc:
            raise EngineUnavailableError(f"the engine did not answer within {self._timeout_s:.0f}s") from exc
