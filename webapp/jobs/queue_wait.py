"""How long a job submitted now would wait for admission: the admission pass replayed forward
in time over what holds the cluster and what is queued ahead of it.

The inputs are forecasts (each job's remaining run from the simulator), and the replay keeps
to what admission does most of the time:

- the jobs ahead are admitted strictly in order, each once its GPUs are free (a pass never lets
  a later job past one waiting for capacity);
- the new job also waits for its own tenant's limits: ``max_running_jobs`` and its guarantee
  plus borrow limit, counted over the tenant's jobs held and admitted in the replay;
- a job within its tenant's guarantee gets borrowed GPUs of other tenants back at their next
  checkpoint (a step), as a reclaim does.

Not replayed: fair share's reordering among jobs of equal priority (every queued job of equal
or higher priority counts as ahead, so the wait errs long), other tenants' own limits (their
jobs ahead are taken to start when GPUs free up), and jobs submitted later with a higher
priority.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class HeldJob:
    tenant_id: int
    num_gpus: int
    remaining_s: float
    """Until it ends, from its forecast."""
    borrowed: bool = False
    step_s: float = 0.0
    """Its pace: how soon a reclaim gets its GPUs back (at its next checkpoint)."""


@dataclass(frozen=True, slots=True)
class QueuedJob:
    tenant_id: int
    num_gpus: int
    run_s: float
    """Its whole run, from its forecast."""


class _Hold(NamedTuple):
    """A job holding GPUs in the replay; a heap of them pops the next to end."""

    end_s: float
    seq: int
    tenant_id: int
    num_gpus: int
    borrowed: bool
    step_s: float


@dataclass(frozen=True, slots=True)
class TenantLimits:
    max_running_jobs: int
    max_gpus: int
    """Guarantee plus borrow limit on the cluster's device type."""
    guaranteed_gpus: int


def queue_wait_s(
    *,
    capacity: int,
    held: list[HeldJob],
    ahead: list[QueuedJob],
    job: QueuedJob,
    limits: TenantLimits | None,
) -> float | None:
    """Seconds until ``job`` is admitted, behind ``ahead`` (in admission order) on a cluster of
    ``capacity`` GPUs where ``held`` run now; None if it never would be (its tenant's limits
    leave no room for it even on an empty cluster)."""
    if job.num_gpus > capacity or (limits is not None and job.num_gpus > limits.max_gpus):
        return None
    now = 0.0
    free = capacity - sum(h.num_gpus for h in held)
    running = [
        _Hold(max(0.0, h.remaining_s), seq, h.tenant_id, h.num_gpus, h.borrowed, h.step_s) for seq, h in enumerate(held)
    ]
    heapq.heapify(running)
    seq = len(held)
    queue = [*ahead, job]
    while queue:
        head = queue[0]
        if head.num_gpus <= free and (head is not job or _tenant_allows(job, running, limits)):
            if head is job:
                return now
            queue.pop(0)
            free -= head.num_gpus
            heapq.heappush(running, _Hold(now + head.run_s, seq, head.tenant_id, head.num_gpus, False, 0.0))
            seq += 1
            continue
        if head is job and _within_guarantee(job, running, limits):
            running = _reclaimed(running, job.tenant_id, now)
        if not running:
            return None
        ended = heapq.heappop(running)
        now = max(now, ended.end_s)
        free += ended.num_gpus
    return None  # unreachable: the loop returns when the job reaches the head and fits


def _tenant_allows(job: QueuedJob, running: list[_Hold], limits: TenantLimits | None) -> bool:
    if limits is None:
        return True
    mine = [r for r in running if r.tenant_id == job.tenant_id]
    return len(mine) < limits.max_running_jobs and sum(r.num_gpus for r in mine) + job.num_gpus <= limits.max_gpus


def _within_guarantee(job: QueuedJob, running: list[_Hold], limits: TenantLimits | None) -> bool:
    if limits is None:
        return False
    mine = sum(r.num_gpus for r in running if r.tenant_id == job.tenant_id)
    return mine + job.num_gpus <= limits.guaranteed_gpus


def _reclaimed(running: list[_Hold], tenant_id: int, now: float) -> list[_Hold]:
    """Other tenants' borrowed jobs end at their next checkpoint instead (paused, GPUs back)."""
    out = [
        r._replace(end_s=min(r.end_s, now + r.step_s), borrowed=False) if r.borrowed and r.tenant_id != tenant_id else r
        for r in running
    ]
    heapq.heapify(out)
    return out
