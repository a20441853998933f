"""Admission: which queued jobs get capacity now, and why the others wait.

One pass (``admission_tick``) runs in one transaction under a Postgres advisory lock, so
exactly one process admits at a time however many workers and beats run; an admin's quota
edit takes the same lock (``QUOTA_DECISIONS_LOCK_KEY``), so it waits for the pass.

Order: priority (higher first), then fair share (a tenant's decayed GPU-seconds plus what it
holds now, divided by its weight; lower first), then submission time. A job waits with one
reason:

- ``budget``: its tenant has spent this month's GPU-hours (budgets never decay);
- ``quota``: its tenant is at ``max_running_jobs`` or would pass guarantee + borrow limit;
- ``capacity``: it does not fit in the free GPUs (if it is within its tenant's guarantee,
  borrowed jobs of other tenants are asked to pause at their next checkpoint);
- ``priority`` / ``fair_share``: it would fit, but a job ahead of it (higher priority, or
  a tenant with a smaller share) is waiting for capacity and must not be starved.

Capacity beyond a tenant's guarantee is borrowed: it is lent only while idle, and only
borrowed jobs are reclaimed, always after a checkpoint (a pause at a step boundary).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from tenants.models import QUOTA_DECISIONS_LOCK_KEY, BudgetAction, Quota
from webapp import engine_gateway
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.services.lifecycle import RECLAIM_REASON, job_admit, job_pause, job_set_queue_reason
from webapp.jobs.usage import decayed_gpu_seconds, month_gpu_hours

logger = logging.getLogger(__name__)

HOLD_WEIGHT_S = 3600.0
"""In fair share, each GPU a tenant holds now counts as this many GPU-seconds of usage."""

QUEUED_FIELDS = ("id", "tenant_id", "name", "num_gpus", "priority", "created_at", "status_reason")
"""What a pass reads of each queued job: not the specs, which a long queue would drag along."""

HOLDING_STATUSES = (
    JobStatus.QUEUED,
    JobStatus.STARTING,
    JobStatus.RUNNING,
    JobStatus.RECOVERING,
    JobStatus.PAUSING,
    JobStatus.CANCELLING,
)


@dataclass
class AdmissionResult:
    leader: bool = True
    admitted: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    """job id -> reason code."""
    reclaiming: list[str] = field(default_factory=list)
    """Borrowed jobs asked to pause so a tenant gets its guarantee back."""
    budget_paused: list[str] = field(default_factory=list)


def holding_jobs() -> Any:
    """Jobs that hold capacity: admitted and not yet ended or paused."""
    return Job.objects.filter(admitted_at__isnull=False, status__in=HOLDING_STATUSES)


def _try_lock() -> bool:
    if connection.vendor != "postgresql":
        return True  # standalone (SQLite, one process): nothing to race with
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [QUOTA_DECISIONS_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def admission_tick() -> AdmissionResult:
    """Admit what fits, in order; record why the rest waits; start reclaims. Idempotent.

    Its writes follow what changed, not the queue's length: queued rows are read without row
    locks (narrow columns only), a waiting job's reason is written only when its text changes
    (the texts carry no volatile numbers such as the free GPU count), and each admit or reason
    write is a guarded update of that one row, so a cancel that got there first wins."""
    with transaction.atomic():
        if not _try_lock():
            return AdmissionResult(leader=False)
        device_type, capacity = engine_gateway.cluster_capacity()
        waiting = list(
            Job.objects.filter(status=JobStatus.QUEUED, admitted_at__isnull=True)
            .only(*QUEUED_FIELDS)
            .order_by("created_at", "id")
        )
        holding = list(holding_jobs().values("tenant_id").annotate(g=Sum("num_gpus"), n=Count("pk")))
        held = defaultdict(int, {r["tenant_id"]: r["g"] for r in holding})
        running = defaultdict(int, {r["tenant_id"]: r["n"] for r in holding})
        tenant_ids = sorted({j.tenant_id for j in waiting} | set(held))
        # No row locks: quota edits wait for this pass's advisory lock, and submits (which lock
        # their tenant's quota row to count queued jobs) must not wait for a whole pass.
        quotas = {q.tenant_id: q for q in Quota.objects.filter(tenant_id__in=tenant_ids)}
        free = capacity - sum(held.values())
        spent = month_gpu_hours(tenant_ids=tenant_ids)
        decayed = decayed_gpu_seconds(tenant_ids=tenant_ids)
        result = AdmissionResult()

        for tid, quota in quotas.items():
            if quota.budget_action == BudgetAction.PAUSE and spent.get(tid, 0.0) >= quota.monthly_gpu_hours:
                for job in holding_jobs().filter(tenant_id=tid, status=JobStatus.RUNNING):
                    if job_pause(job=job, reason="budget: this month's GPU-hours are spent", quiet=True):
                        result.budget_paused.append(str(job.pk))

        def share_key(tid: int) -> float:
            weight = quotas[tid].fair_share_weight if tid in quotas else 1.0
            return (decayed.get(tid, 0.0) + held[tid] * HOLD_WEIGHT_S) / max(weight, 1e-9)

        waiting.sort(key=lambda j: (-j.priority, share_key(j.tenant_id), j.created_at, str(j.pk)))
        blocked: Job | None = None
        for job in waiting:
            quota = quotas.get(job.tenant_id)
            reason = _tenant_limit(job, quota, device_type, held, running, spent)
            if reason is None and blocked is not None:
                # Not naming the job in front: the front changes with each admit, and a text
                # that names it would be rewritten on every waiting job each time.
                if blocked.priority > job.priority:
                    reason = ("priority", "a higher-priority job is waiting for capacity")
                elif blocked.tenant_id != job.tenant_id:
                    reason = ("fair_share", "a tenant with a smaller share of the cluster is waiting for capacity")
                else:
                    reason = ("capacity", "an earlier job of your tenant is waiting for capacity")
            if reason is None and job.num_gpus > free:
                within = quota is not None and held[job.tenant_id] + job.num_gpus <= quota.guaranteed_for(device_type)
                # No free count either: it changes with every job that starts or ends.
                detail = f"needs {job.num_gpus} GPUs, more than are free (the cluster has {capacity})"
                if within:
                    asked, coming = _reclaim(job.num_gpus - free, job.tenant_id)
                    result.reclaiming.extend(asked)
                    if coming:
                        detail += f"; reclaiming borrowed GPUs from {coming} job(s) after their next checkpoint"
                reason = ("capacity", detail)
                blocked = job
            if reason is not None:
                code, detail = reason
                result.waiting[str(job.pk)] = code
                job_set_queue_reason(job=job, code=code, detail=detail)
                continue
            borrowed = quota is None or held[job.tenant_id] + job.num_gpus > quota.guaranteed_for(device_type)
            if not job_admit(job=job, borrowed=borrowed):
                continue  # cancelled (or paused) since it was read: it takes no capacity
            held[job.tenant_id] += job.num_gpus
            running[job.tenant_id] += 1
            free -= job.num_gpus
            result.admitted.append(str(job.pk))
        return result


def _tenant_limit(
    job: Job,
    quota: Quota | None,
    device_type: str,
    held: dict[int, int],
    running: dict[int, int],
    spent: dict[int, float],
) -> tuple[str, str] | None:
    """The tenant's own limit that keeps ``job`` waiting, or None."""
    if quota is None:
        return None
    used = spent.get(job.tenant_id, 0.0)
    if used >= quota.monthly_gpu_hours:
        return ("budget", f"this month's {quota.monthly_gpu_hours:g} GPU-hours are spent ({used:.1f} used)")
    if running[job.tenant_id] >= quota.max_running_jobs:
        return ("quota", f"{running[job.tenant_id]} jobs running, the limit is {quota.max_running_jobs}")
    ceiling = quota.guaranteed_for(device_type) + quota.borrow_limit_gpus
    would_hold = held[job.tenant_id] + job.num_gpus
    if would_hold > ceiling:
        return ("quota", f"would hold {would_hold} {device_type} GPUs; guarantee + borrow limit is {ceiling}")
    return None


def _reclaim(gpus_needed: int, for_tenant: int) -> tuple[list[str], int]:
    """Ask borrowed running jobs of other tenants (newest first) to pause until ``gpus_needed``
    are coming back; jobs already pausing count. Returns the jobs asked now and how many
    borrowed jobs are pausing in all (the count stays the same from pass to pass while they
    reach their checkpoints, so the waiting job's reason is not rewritten each pass)."""
    pausing = list(
        holding_jobs()
        .filter(borrowed=True, status=JobStatus.PAUSING)
        .exclude(tenant_id=for_tenant)
        .values_list("num_gpus", flat=True)
    )
    coming = sum(pausing)
    asked: list[str] = []
    candidates = (
        holding_jobs()
        .filter(borrowed=True, status__in=(JobStatus.RUNNING, JobStatus.STARTING))
        .exclude(tenant_id=for_tenant)
        .order_by("-admitted_at")
    )
    for job in candidates:
        if coming >= gpus_needed:
            break
        if job_pause(
            job=job,
            reason=f"{RECLAIM_REASON}: its tenant was borrowing capacity another tenant is guaranteed",
        ):
            coming += job.num_gpus
            asked.append(str(job.pk))
    return asked, len(pausing) + len(asked)


def queue_summary() -> list[dict[str, Any]]:
    """Every queued job on the cluster with its reason (the admin's global queue)."""
    jobs = Job.objects.filter(status=JobStatus.QUEUED).select_related("tenant").order_by("created_at", "id")
    return [
        {
            "id": str(j.pk),
            "name": j.name,
            "tenant": j.tenant.slug,
            "num_gpus": j.num_gpus,
            "priority": j.priority,
            "admitted": j.admitted_at is not None,
            "reason": j.status_reason,
            "created_at": j.created_at.isoformat(),
        }
        for j in jobs
    ]


def capacity_summary() -> dict[str, Any]:
    device_type, capacity = engine_gateway.cluster_capacity()
    by_tenant = (
        holding_jobs()
        .values("tenant__slug")
        .annotate(gpus=Sum("num_gpus"), borrowed=Sum("num_gpus", filter=Q(borrowed=True)))
    )
    held = {r["tenant__slug"]: {"gpus": r["gpus"], "borrowed_gpus": r["borrowed"] or 0} for r in by_tenant}
    return {
        "device_type": device_type,
        "num_gpus": capacity,
        "gpus_held": sum(v["gpus"] for v in held.values()),
        "by_tenant": held,
        "checked_at": timezone.now().isoformat(),
    }
