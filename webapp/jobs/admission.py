"""Admission: which queued jobs get capacity now, and why the others wait.

The rules (priority, fair share, borrowing beyond a guarantee, reclaiming at checkpoints) and
each waiting job's reason are the engine's pure decision (``engine_gateway.decide_admission``,
documented in ``jigsaw_engine.control.admission_policy``); the arrivals simulator applies the
same function. This module feeds it the database's state and writes what it decides.

One pass (``admission_tick``) runs in one transaction under a Postgres advisory lock, so
exactly one process admits at a time however many workers and beats run; an admin's quota
edit takes the same lock (``QUOTA_DECISIONS_LOCK_KEY``), so it waits for the pass. A tenant
whose budget action is ``pause`` and whose month's GPU-hours are spent has its running jobs
paused before the decision.
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


class _DatabaseEffects:
    """The engine's admission decision written to the job rows, one job at a time."""

    def __init__(self, jobs: dict[str, Job]) -> None:
        self._jobs = jobs
        self._held: dict[str, Job] = {}

    def admit(self, job: engine_gateway.QueuedJob, *, borrowed: bool) -> bool:
        return job_admit(job=self._jobs[job.job_id], borrowed=borrowed)

    def wait(self, job: engine_gateway.QueuedJob, code: str, detail: str) -> None:
        job_set_queue_reason(job=self._jobs[job.job_id], code=code, detail=detail)

    def borrowed_jobs(self, for_tenant: Any) -> list[engine_gateway.HeldJob]:
        rows = (
            holding_jobs()
            .filter(borrowed=True, status__in=(JobStatus.RUNNING, JobStatus.STARTING, JobStatus.PAUSING))
            .exclude(tenant_id=for_tenant)
        )
        found = []
        for row in rows:
            self._held[str(row.pk)] = row
            found.append(
                engine_gateway.HeldJob(
                    job_id=str(row.pk),
                    tenant=row.tenant_id,
                    num_gpus=row.num_gpus,
                    admitted_s=row.admitted_at.timestamp(),
                    pausing=row.status == JobStatus.PAUSING,
                )
            )
        return found

    def pause(self, job: engine_gateway.HeldJob) -> bool:
        return job_pause(
            job=self._held[job.job_id],
            reason=f"{RECLAIM_REASON}: its tenant was borrowing capacity another tenant is guaranteed",
        )


def admission_tick() -> AdmissionResult:
    """Admit what fits, in order; record why the rest waits; start reclaims. Idempotent.

    The decision is the engine's (``engine_gateway.decide_admission``), made on this pass's
    rows; this function reads them and writes what it decides.

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
        # No row locks: quota edits wait for this pass's advisory lock, and submits (which lock
        # their tenant's quota row to count queued jobs) must not wait for a whole pass.
        state = tenant_state(queued_tenant_ids={j.tenant_id for j in waiting}, device_type=device_type)
        result = AdmissionResult()

        for tid, quota in state.quotas.items():
            if (
                quota.budget_action == BudgetAction.PAUSE
                and state.usage[tid].spent_gpu_hours >= quota.monthly_gpu_hours
            ):
                for job in holding_jobs().filter(tenant_id=tid, status=JobStatus.RUNNING):
                    if job_pause(job=job, reason="budget: this month's GPU-hours are spent", quiet=True):
                        result.budget_paused.append(str(job.pk))

        queued = [
            engine_gateway.QueuedJob(
                job_id=str(j.pk),
                tenant=j.tenant_id,
                num_gpus=j.num_gpus,
                priority=j.priority,
                created_s=j.created_at.timestamp(),
            )
            for j in waiting
        ]
        decided = engine_gateway.decide_admission(
            capacity_gpus=capacity,
            device_type=device_type,
            tenants=state.usage,
            queued=queued,
            effects=_DatabaseEffects({str(j.pk): j for j in waiting}),
        )
        result.admitted = decided.admitted
        result.waiting = decided.waiting
        result.reclaiming = decided.reclaiming
        return result


@dataclass
class TenantState:
    quotas: dict[int, Quota]
    usage: dict[int, engine_gateway.TenantUsage]
    """What the engine's decision reads of each tenant: limits, usage, what it holds now."""


def tenant_state(*, queued_tenant_ids: set[int], device_type: str) -> TenantState:
    """Each tenant with jobs queued (``queued_tenant_ids``) or holding capacity, as an admission
    pass reads it; the estimate's queue wait reads the same."""
    holding = list(holding_jobs().values("tenant_id").annotate(g=Sum("num_gpus"), n=Count("pk")))
    held = defaultdict(int, {r["tenant_id"]: r["g"] for r in holding})
    running = defaultdict(int, {r["tenant_id"]: r["n"] for r in holding})
    tenant_ids = sorted(queued_tenant_ids | set(held))
    quotas = {q.tenant_id: q for q in Quota.objects.filter(tenant_id__in=tenant_ids)}
    spent = month_gpu_hours(tenant_ids=tenant_ids)
    decayed = decayed_gpu_seconds(tenant_ids=tenant_ids)
    usage = {
        tid: engine_gateway.TenantUsage(
            limits=_limits(quotas.get(tid), device_type),
            decayed_gpu_seconds=decayed.get(tid, 0.0),
            held_gpus=held[tid],
            running_jobs=running[tid],
            spent_gpu_hours=spent.get(tid, 0.0),
        )
        for tid in tenant_ids
    }
    return TenantState(quotas, usage)


def _limits(quota: Quota | None, device_type: str) -> engine_gateway.TenantLimits | None:
    if quota is None:
        return None
    return engine_gateway.TenantLimits(
        guarantee_gpus=quota.guaranteed_for(device_type),
        borrow_limit_gpus=quota.borrow_limit_gpus,
        weight=quota.fair_share_weight,
        max_running_jobs=quota.max_running_jobs,
        monthly_gpu_hours=quota.monthly_gpu_hours,
    )


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
