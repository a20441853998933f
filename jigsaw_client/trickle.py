"""A steady trickle of new jobs from several tenants, the load a shared cluster sees: when the
next job is due and which one it is. No I/O: the caller says what time it is and how many
unfinished jobs each tenant has, and submits what it is given (``scripts/demo.py`` does,
through the REST API with each tenant's token).

Tenants take turns; each one's jobs come from its own list, in order, round and round. A
tenant with ``max_in_flight`` unfinished jobs is passed over until one of them ends, so
however long the trickle runs, what waits in the queue stays bounded (only finished jobs
pile up).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNFINISHED_STATUSES = ("queued", "starting", "running", "recovering", "pausing", "cancelling")
"""Jobs that count against a tenant's cap: holding capacity or waiting for it (a paused job
waits for its owner to resume it, not for the queue)."""


@dataclass(frozen=True)
class TrickleJob:
    tenant: str
    preset: str
    """A name from ``GET /api/v1/presets``."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """Top-level spec fields that replace the preset's."""


class Trickle:
    """Paces ``jobs_per_minute`` submissions from ``start`` on (clock seconds, any monotonic
    clock), until ``max_jobs`` were handed out or the clock passes ``stop_at``."""

    def __init__(
        self,
        jobs: Sequence[TrickleJob],
        *,
        jobs_per_minute: float,
        start: float,
        max_in_flight: int = 4,
        max_jobs: int | None = None,
        stop_at: float | None = None,
    ) -> None:
        if not jobs:
            raise ValueError("a trickle needs at least one job to submit")
        if jobs_per_minute <= 0:
            raise ValueError(f"jobs_per_minute must be > 0, got {jobs_per_minute:g}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.interval_s = 60.0 / jobs_per_minute
        self.due_at = start
        self.max_in_flight = max_in_flight
        self.max_jobs = max_jobs
        self.stop_at = stop_at
        self.handed_out = 0
        by_tenant: dict[str, list[TrickleJob]] = {}
        for job in jobs:
            by_tenant.setdefault(job.tenant, []).append(job)
        self.tenants = list(by_tenant)
        self._next_of: dict[str, Iterator[TrickleJob]] = {t: itertools.cycle(js) for t, js in by_tenant.items()}
        self._turn = 0  # index in ``tenants`` of the one whose turn is next

    def finished(self, now: float) -> bool:
        out_of_jobs = self.max_jobs is not None and self.handed_out >= self.max_jobs
        return out_of_jobs or (self.stop_at is not None and now >= self.stop_at)

    def due(self, now: float) -> bool:
        return not self.finished(now) and now >= self.due_at

    def defer(self, now: float) -> None:
        """Nothing could be submitted now (the service did not answer): try one interval later."""
        self.due_at = now + self.interval_s

    def take(self, now: float, in_flight: Mapping[str, int]) -> TrickleJob | None:
        """The job to submit now, or None: none is due, the trickle is over, or every tenant
        is at its cap (then one stays due, and the first call after a job ends gets it)."""
        if not self.due(now):
            return None
        for k in range(len(self.tenants)):
            i = (self._turn + k) % len(self.tenants)
            tenant = self.tenants[i]
            if in_flight.get(tenant, 0) >= self.max_in_flight:
                continue
            self._turn = i + 1
            self.handed_out += 1
            # Late by less than an interval (the caller polls): keep the rhythm. After waiting
            # for a free slot, start it again from now instead of catching up in a burst.
            late = now - self.due_at
            self.due_at = (self.due_at if late < self.interval_s else now) + self.interval_s
            return next(self._next_of[tenant])
        return None
