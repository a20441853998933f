"""Plain data that crosses the engine's door: events out, the host protocol in.

Events are numbered by the engine host (``seq``, strictly increasing per ``engine_id``), so
a consumer that stores its cursor can pull them again after any crash without losing or
repeating one: it keeps events with ``seq`` above its cursor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class PipelineState(StrEnum):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    """Stopped at a step boundary (its checkpoint) on request; ``resume`` continues from there."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (PipelineState.SUCCEEDED, PipelineState.FAILED, PipelineState.CANCELLED)


class EventKind(StrEnum):
    STATUS = "status"
    """``data``: ``status`` (a :class:`PipelineState`), ``reason``, ``step``, ``total_steps``,
    and ``device_seconds`` when devices were used since the last step's metrics."""
    METRICS = "metrics"
    """``data``: ``step`` (1-based), ``total_steps``, ``metrics`` (name -> number), among them
    ``usage/device_seconds``: device time this pipeline used since its previous report, each
    span weighted by its share of the device, so co-located pipelines split a device exactly."""
    LOG = "log"
    """``data``: ``level``, ``message``."""
    SAMPLES = "samples"
    """Real pipelines only. ``data``: ``step``, ``samples`` (each ``prompt``, ``completion``,
    ``answer``, ``reward``, ``turns``, ``response_tokens``, ``reward_error``): a few of the step's
    completions, for people to read."""


@dataclass(frozen=True, slots=True)
class EngineEvent:
    seq: int
    pipeline_id: str
    kind: EventKind
    sim_time_s: float
    """The engine's clock when it happened (virtual in the simulator, wall in Ray)."""
    data: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "pipeline_id": self.pipeline_id,
            "kind": self.kind.value,
            "sim_time_s": self.sim_time_s,
            "data": dict(self.data),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> EngineEvent:
        return cls(
            seq=int(raw["seq"]),
            pipeline_id=str(raw["pipeline_id"]),
            kind=EventKind(raw["kind"]),
            sim_time_s=float(raw["sim_time_s"]),
            data=dict(raw["data"]),
        )


@dataclass(frozen=True, slots=True)
class EventBatch:
    engine_id: str
    """Identity of this engine instance; a restarted engine numbers its events afresh."""
    events: list[EngineEvent] = field(default_factory=list)
    next_cursor: int = 0
    """Pass back as ``cursor`` to get the events after these."""


class EngineHost(Protocol):
    """What the control plane can ask of a running engine, in-process or on Ray."""

    @property
    def engine_id(self) -> str: ...

    def submit(self, pipeline_id: str, spec: Mapping[str, Any]) -> None:
        """Accept a pipeline (idempotent for the same id); raises ``SpecError`` if invalid."""

    def cancel(self, pipeline_id: str) -> bool:
        """Stop a pipeline; False if the engine does not know it or it already ended."""

    def pause(self, pipeline_id: str) -> bool:
        """Stop a pipeline at its next step boundary (``paused`` event); False if unknown or ended.

        Submitting a paused pipeline's id again resumes it after its last finished step."""

    def events_since(self, cursor: int, limit: int = 1000) -> EventBatch: ...

    def pipeline_states(self) -> dict[str, str]:
        """Every pipeline this engine instance knows, with its state (for reconciliation)."""

    def timeline(self, window_s: float) -> dict[str, Any]:
        """Sub-stage spans of the last ``window_s`` engine seconds, running ones included:
        ``now_s``, ``since_s``, ``device_type``, ``num_devices``, ``spans`` (each
        ``pipeline_id``, ``kind``, ``bucket``, ``step``, ``worker``, ``devices``, ``start_s``,
        ``end_s``, ``share``, ``running``)."""

    def describe(self) -> dict[str, Any]:
        """Cluster size, devices in use, pipelines by state: for health and the dashboard."""

    def close(self) -> None: ...
