"""Deleting ended jobs: by a tenant's request, or by its retention setting.

A deleted job takes its checkpoints (rows and files), samples, logs, events and metrics with
it; its usage ledger rows stay (the job link cleared, its id and name kept), so what a tenant
used never changes after the fact. Each deletion leaves an audit row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from tenants.models import Tenant
from tenants.services import audit_record
from webapp import engine_gateway
from webapp.jobs.errors import InvalidTransition
from webapp.jobs.models import TERMINAL_STATUSES, Job, JobCheckpoint, JobEvent, JobMetrics, UsageRecord

logger = logging.getLogger(__name__)

RETENTION_BATCH = 200
"""Jobs one retention pass deletes at most (per tenant): a pass stays short, the next one
takes the rest."""


@dataclass(frozen=True, slots=True)
class DeletedJob:
    job_id: str
    name: str
    checkpoint_files: int
    checkpoint_bytes: int


def job_delete(*, job: Job, actor: Any, reason: str = "request") -> DeletedJob | None:
    """Delete an ended job; None if it is gone already (a concurrent deletion), InvalidTransition
    if it has not ended.

    The files go first, under the row's lock: if anything after fails, the transaction rolls
    back, the job is still listed, and deleting it again finishes the work (removing files
    that are gone removes nothing)."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().filter(pk=job.pk).defer("spec", "resolved_spec").first()
        if locked is None:
            return None
        if locked.status not in TERMINAL_STATUSES:
            raise InvalidTransition(
                f"job {locked.name} is {locked.status}: only an ended job can be deleted; "
                f"cancel it first (POST /api/v1/jobs/{locked.pk}/cancel), then delete it once it is cancelled",
                [{"field": "status", "message": f"is {locked.status}; must be succeeded, failed or cancelled"}],
            )
        job_id = str(locked.pk)
        files, size = engine_gateway.remove_job_checkpoints(job_id=job_id)
        UsageRecord.objects.filter(job=locked).update(job_name=locked.name)  # the final name outlives it
        counts = {
            "checkpoints": JobCheckpoint.objects.filter(job=locked).count(),
            "events": JobEvent.objects.filter(job=locked).count(),
            "metric_steps": JobMetrics.objects.filter(job=locked).count(),
        }
        locked.delete()
        audit_record(
            tenant=locked.tenant,
            actor=actor,
            action="job.delete",
            target=job_id,
            data={
                "name": locked.name,
                "status": locked.status,
                "reason": reason,
                "gpu_seconds": locked.gpu_seconds,
                "checkpoint_files": files,
                "checkpoint_bytes": size,
                **counts,
            },
        )
    logger.info("deleted job %s (%s): %d checkpoint files, %d bytes", job_id, reason, files, size)
    return DeletedJob(job_id=job_id, name=locked.name, checkpoint_files=files, checkpoint_bytes=size)


def expired_jobs(*, tenant: Tenant, now: datetime | None = None, limit: int = RETENTION_BATCH) -> list[Job]:
    """The tenant's ended jobs that ended (or, never started, were created) more than its
    ``job_retention_days`` ago, oldest first; none when the tenant keeps jobs for ever."""
    if tenant.job_retention_days is None:
        return []
    cutoff = (now or timezone.now()) - timedelta(days=tenant.job_retention_days)
    return list(
        Job.objects.filter(tenant=tenant, status__in=TERMINAL_STATUSES)
        .annotate(ended_at=Coalesce("finished_at", "created_at"))
        .filter(ended_at__lt=cutoff)
        .defer("spec", "resolved_spec")
        .order_by("ended_at")[:limit]
    )


def retention_sweep(*, now: datetime | None = None) -> int:
    """Delete every tenant's expired jobs (a batch per tenant); how many were deleted. A job
    that fails to delete is logged and left for the next pass."""
    deleted = 0
    for tenant in Tenant.objects.filter(~Q(job_retention_days=None)).order_by("pk"):
        for job in expired_jobs(tenant=tenant, now=now):
            try:
                if job_delete(job=job, actor=None, reason=f"retention: {tenant.job_retention_days} days") is not None:
                    deleted += 1
            except Exception:
                logger.exception("retention: deleting job %s failed; the next pass retries", job.pk)
    return deleted
