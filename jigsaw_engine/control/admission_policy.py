"""Admission as a pure decision: which queued jobs get capacity now, why the others wait, and
which borrowed jobs give capacity back. The service calls it with its database state (through
``webapp.engine_gateway``), the arrivals simulator with its own, so both apply the same rules.

Order: priority (higher first), then fair share (a tenant's decayed GPU-seconds plus what it
holds now, divided by its weight; lower first), then submission time. A job waits with one
reason:

- ``budget``: its tenant has spent this month's GPU-hours;
- ``quota``: its tenant is at its running-job limit or would pass guarantee + borrow limit;
- ``capacity``: it does not fit in the free GPUs (if it is within its tenant's guarantee,
  borrowed jobs of other tenants are asked to pause at their next checkpoint);
- ``priority`` / ``fair_share``: it would fit, but a job ahead of it (higher priority, or a
  tenant with a smaller share) is waiting for capacity and must not be starved.

Capacity beyond a tenant's guarantee is borrowed: lent only while idle, and only borrowed jobs
are reclaimed, newest first, always at a checkpoint (a pause at a step boundary).

The caller's writes go through :class:`AdmissionEffects`, one job at a time and in decision
order: an admit the caller cannot make (the job was cancelled since it was read) takes no
capacity, which then goes to the next job, as a pass over live rows must behave.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

HOLD_WEIGHT_S = 3600.0
"""In fair share, each GPU a tenant holds now counts as this many GPU-seconds of usage: a tenant
that just took the cluster is not first in line again before its usage is recorded."""

TenantKey = Hashable
"""A tenant's key: the service's tenant id, the simulator's tenant name."""


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """A tenant's quota as admission reads it (GPU counts are for the cluster's device type)."""

    guarantee_gpus: int
    borrow_limit_gpus: int
    weight: float = 1.0
    max_running_jobs: int = 1 << 30
    monthly_gpu_hours: float = float("inf")


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """What a tenant holds and has used. ``limits`` None: no quota, so no limit and no
    guarantee (everything it runs is borrowed)."""

    limits: TenantLimits | None
    decayed_gpu_seconds: float = 0.0
    held_gpus: int = 0
    running_jobs: int = 0
    spent_gpu_hours: float = 0.0


@dataclass(frozen=True, slots=True)
class QueuedJob:
    job_id: str
    tenant: TenantKey
    num_gpus: int
    priority: float
    created_s: float
    """Submission time in any clock shared by the pass's jobs; only the order matters."""


@dataclass(frozen=True, slots=True)
class HeldJob:
    """A job holding capacity on borrowed GPUs (a reclaim candidate)."""

    job_id: str
    tenant: TenantKey
    num_gpus: int
    admitted_s: float
    pausing: bool
    """Already asked to pause: its GPUs are coming back."""


class AdmissionEffects(Protocol):
    def admit(self, job: QueuedJob, *, borrowed: bool) -> bool:
        """Give ``job`` its capacity; False if it can no longer be admitted (it then takes none)."""
        ...

    def wait(self, job: QueuedJob, code: str, detail: str) -> None: ...

    def borrowed_jobs(self, for_tenant: TenantKey) -> Sequence[HeldJob]:
        """Borrowed jobs of tenants other than ``for_tenant`` that hold capacity (read only when a
        job within its guarantee is blocked, which is rare)."""
        ...

    def pause(self, job: HeldJob) -> bool:
        """Ask ``job`` to pause at its next checkpoint; False if it cannot be asked (it ended)."""
        ...


@dataclass(slots=True)
class AdmissionOutcome:
    admitted: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    """job id -> reason code."""
    reclaiming: list[str] = field(default_factory=list)
    """Borrowed jobs asked to pause now so a tenant gets its guarantee back."""


def decide_admission(
    *,
    capacity_gpus: int,
    device_type: str,
    tenants: Mapping[Any, TenantUsage],
    queued: Sequence[QueuedJob],
    effects: AdmissionEffects,
) -> AdmissionOutcome:
    """One admission pass over ``queued`` (see the module's rules), writing through ``effects``."""
    none = TenantUsage(limits=None)
    held = {t: u.held_gpus for t, u in tenants.items()}
    running = {t: u.running_jobs for t, u in tenants.items()}
    free = capacity_gpus - sum(held.values())
    outcome = AdmissionOutcome()

    def share_key(tenant: TenantKey) -> float:
        usage = tenants.get(tenant, none)
        weight = usage.limits.weight if usage.limits is not None else 1.0
        return (usage.decayed_gpu_seconds + usage.held_gpus * HOLD_WEIGHT_S) / max(weight, 1e-9)

    order = sorted(queued, key=lambda j: (-j.priority, share_key(j.tenant), j.created_s, j.job_id))
    blocked: QueuedJob | None = None
    for job in order:
        usage = tenants.get(job.tenant, none)
        limits = usage.limits
        now_held = held.get(job.tenant, 0)
        reason = tenant_limit(job, usage, device_type, now_held, running.get(job.tenant, 0))
        if reason is None and blocked is not None:
            # Not naming the job in front: the front changes with each admit, and a text that
            # names it would be rewritten on every waiting job each time.
            if blocked.priority > job.priority:
                reason = ("priority", "a higher-priority job is waiting for capacity")
            elif blocked.tenant != job.tenant:
                reason = ("fair_share", "a tenant with a smaller share of the cluster is waiting for capacity")
            else:
                reason = ("capacity", "an earlier job of your tenant is waiting for capacity")
        if reason is None and job.num_gpus > free:
            within = limits is not None and now_held + job.num_gpus <= limits.guarantee_gpus
            # No free count either: it changes with every job that starts or ends.
            detail = f"needs {job.num_gpus} GPUs, more than are free (the cluster has {capacity_gpus})"
            if within:
                asked, coming = choose_reclaims(job.num_gpus - free, effects.borrowed_jobs(job.tenant), effects)
                outcome.reclaiming.extend(asked)
                if coming:
                    detail += f"; reclaiming borrowed GPUs from {coming} job(s) after their next checkpoint"
            reason = ("capacity", detail)
            blocked = job
        if reason is not None:
            code, text = reason
            outcome.waiting[job.job_id] = code
            effects.wait(job, code, text)
            continue
        borrowed = limits is None or now_held + job.num_gpus > limits.guarantee_gpus
        if not effects.admit(job, borrowed=borrowed):
            continue  # gone since it was read: it takes no capacity
        held[job.tenant] = now_held + job.num_gpus
        running[job.tenant] = running.get(job.tenant, 0) + 1
        free -= job.num_gpus
        outcome.admitted.append(job.job_id)
    return outcome


def tenant_limit(
    job: QueuedJob, usage: TenantUsage, device_type: str, held_gpus: int, running_jobs: int
) -> tuple[str, str] | None:
    """The tenant's own limit that keeps ``job`` waiting, as (code, detail), or None."""
    limits = usage.limits
    if limits is None:
        return None
    if usage.spent_gpu_hours >= limits.monthly_gpu_hours:
        spent = usage.spent_gpu_hours
        return ("budget", f"this month's {limits.monthly_gpu_hours:g} GPU-hours are spent ({spent:.1f} used)")
    if running_jobs >= limits.max_running_jobs:
        return ("quota", f"{running_jobs} jobs running, the limit is {limits.max_running_jobs}")
    ceiling = limits.guarantee_gpus + limits.borrow_limit_gpus
    would_hold = held_gpus + job.num_gpus
    if would_hold > ceiling:
        return ("quota", f"would hold {would_hold} {device_type} GPUs; guarantee + borrow limit is {ceiling}")
    return None


def choose_reclaims(gpus_needed: int, borrowed: Sequence[HeldJob], effects: AdmissionEffects) -> tuple[list[str], int]:
    """Ask borrowed jobs (newest first) to pause until ``gpus_needed`` are coming back; jobs
    already pausing count. Returns the jobs asked now and how many borrowed jobs are pausing in
    all (the count stays the same from pass to pass while they reach their checkpoints, so the
    waiting job's reason is not rewritten each pass)."""
    pausing = [j for j in borrowed if j.pausing]
    coming = sum(j.num_gpus for j in pausing)
    asked: list[str] = []
    for job in sorted((j for j in borrowed if not j.pausing), key=lambda j: -j.admitted_s):
        if coming >= gpus_needed:
            break
        if effects.pause(job):
            coming += job.num_gpus
            asked.append(job.job_id)
    return asked, len(pausing) + len(asked)
