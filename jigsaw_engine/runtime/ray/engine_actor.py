"""A detached, named Ray actor hosting the engine, and a client that speaks ``EngineHost``.

The actor outlives the process that created it, so Celery workers (short-lived, many) all
reach the one controller that owns the cluster. Events cross as plain dicts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ray

from jigsaw_engine.contracts import EngineEvent, EventBatch
from jigsaw_engine.control.local_engine import LocalEngine
from jigsaw_engine.spec.cluster import ClusterSpec

if TYPE_CHECKING:
    from jigsaw_engine.api import EngineConfig

ACTOR_NAME = "jigsaw-engine"
NAMESPACE = "jigsaw"


@ray.remote(num_cpus=0, max_concurrency=16)  # type: ignore[call-overload]
class EngineActor:
    """Threaded actor: calls run concurrently with the engine's own pacing thread."""

    def __init__(self, config: dict[str, Any]) -> None:
        from jigsaw_engine.api import EngineConfig, start_local_engine

        cluster = ClusterSpec(**config.pop("cluster"))
        self._engine: LocalEngine = start_local_engine(EngineConfig(cluster=cluster, **config))  # type: ignore[assignment]

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
        self._actor = EngineActor.options(  # type: ignore[attr-defined]
            name=ACTOR_NAME,
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
        ).remote(
            {
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
        )
        self._engine_id: str = self._get(self._actor.engine_id.remote())

    @property
    def engine_id(self) -> str:
        return self._engine_id

    def submit(self, pipeline_id: str, spec: Mapping[str, Any]) -> None:
        self._get(self._actor.submit.remote(pipeline_id, dict(spec)))

    def cancel(self, pipeline_id: str) -> bool:
        return bool(self._get(self._actor.cancel.remote(pipeline_id)))

    def pause(self, pipeline_id: str) -> bool:
        return bool(self._get(self._actor.pause.remote(pipeline_id)))

    def pipeline_states(self) -> dict[str, str]:
        states: dict[str, str] = self._get(self._actor.pipeline_states.remote())
        return states

    def timeline(self, window_s: float) -> dict[str, Any]:
        window: dict[str, Any] = self._get(self._actor.timeline.remote(window_s))
        return window

    def events_since(self, cursor: int, limit: int = 1000) -> EventBatch:
        raw = self._get(self._actor.events_since.remote(cursor, limit))
        return EventBatch(
            raw["engine_id"],
            [EngineEvent.from_dict(e) for e in raw["events"]],
            raw["next_cursor"],
        )

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = self._get(self._actor.describe.remote())
        return info

    def close(self) -> None:
        """Drop this client; the detached actor keeps running for other processes."""

    def shutdown_actor(self) -> None:
        ray.kill(self._actor)

    def _get(self, ref: Any) -> Any:
        return ray.get(ref, timeout=self._timeout_s)
