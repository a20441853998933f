"""Numbered, bounded in-memory log of engine events, read by cursor."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from jigsaw_engine.contracts import EngineEvent, EventKind

MAX_EVENTS = 50_000
"""The hard bound. A simulated job's events average about 500 bytes (a metrics event about
1 KB), so this is about 25 MiB; the control plane drains the log every second, and this is
still an hour of its events at 2 jobs/s should it stop reading."""


class EventLog:
    """Append-only with a bounded window; readers keep their own cursor (last seq seen).

    A consumer that falls further behind than ``max_events`` learns it from a ``seq`` gap
    rather than silently. ``read_through`` is the cursor the latest read came with: what the
    reader (the control plane's pump, the only one in the service) says it has stored.
    """

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self._events: deque[EngineEvent] = deque(maxlen=max_events)
        self._last_seq = 0
        self._read_through = 0

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def read_through(self) -> int:
        return self._read_through

    def __len__(self) -> int:
        return len(self._events)

    def append(self, pipeline_id: str, kind: EventKind, sim_time_s: float, data: Mapping[str, Any]) -> EngineEvent:
        self._last_seq += 1
        event = EngineEvent(self._last_seq, pipeline_id, kind, sim_time_s, dict(data))
        self._events.append(event)
        return event

    def since(self, cursor: int, limit: int) -> list[EngineEvent]:
        # The latest cursor, not the largest: a pump that once passed a restarted engine's
        # stale cursor passes the right one on its next read.
        self._read_through = min(cursor, self._last_seq)
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

    def forget_read_before(self, sim_time_s: float) -> int:
        """Drop events older than ``sim_time_s`` that the reader has already stored; returns how
        many. Events nobody has read stay, up to ``max_events``."""
        dropped = 0
        while self._events and self._events[0].seq <= self._read_through and self._events[0].sim_time_s < sim_time_s:
            self._events.popleft()
            dropped += 1
        return dropped
