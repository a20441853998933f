"""Numbered, bounded in-memory log of engine events, read by cursor."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from jigsaw_engine.contracts import EngineEvent, EventKind


class EventLog:
    """Append-only with a bounded window; readers keep their own cursor (last seq seen).

    The window is large: the control plane drains it every second, and a consumer that falls
    further behind than ``max_events`` learns it from a ``seq`` gap rather than silently.
    """

    def __init__(self, max_events: int = 200_000) -> None:
        self._events: deque[EngineEvent] = deque(maxlen=max_events)
        self._last_seq = 0

    @property
    def last_seq(self) -> int:
        return self._last_seq

    def append(self, pipeline_id: str, kind: EventKind, sim_time_s: float, data: Mapping[str, Any]) -> EngineEvent:
        self._last_seq += 1
        event = EngineEvent(self._last_seq, pipeline_id, kind, sim_time_s, dict(data))
        self._events.append(event)
        return event

    def since(self, cursor: int, limit: int) -> list[EngineEvent]:
        if not self._events or cursor >= self._last_seq:
            return []
        first = self._events[0].seq
        start = max(0, cursor + 1 - first)
        out: list[EngineEvent] = []
        for i in range(start, len(self._events)):
            out.append(self._events[i])
            if len(out) >= limit:
                break
        return out
