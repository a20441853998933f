"""Reads for jobs. Every tenant-facing read goes through a tenant filter."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from tenants.models import Tenant
from webapp.jobs.models import Job, JobEvent, JobMetrics, JobStatus


def jobs_for_tenant(*, tenant: Tenant) -> QuerySet[Job]:
    """The tenant's jobs, each annotated with ``queued_ahead`` (queued jobs, of any tenant,
    submitted before it) so a list shows queue positions without a query per row."""
    ahead = (
        Job.objects.filter(status=JobStatus.QUEUED, created_at__lt=OuterRef("created_at"))
        .order_by()
        .values("status")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        Job.objects.filter(tenant=tenant)
        .select_related("tenant")
        .annotate(queued_ahead=Coalesce(Subquery(ahead, output_field=IntegerField()), 0))
    )


def job_get_for_tenant(*, tenant: Tenant, job_id: Any) -> Job | None:
    try:
        return jobs_for_tenant(tenant=tenant).filter(pk=job_id).first()
    except (ValueError, TypeError):  # not a UUID: same answer as a foreign id
        return None


def queue_position(*, job: Job) -> int:
    """1-based place among all queued jobs on the cluster, oldest first (stable as jobs ahead leave)."""
    ahead = getattr(job, "queued_ahead", None)
    if ahead is None:
        ahead = Job.objects.filter(status=JobStatus.QUEUED, created_at__lt=job.created_at).count()
    return int(ahead) + 1


def job_events_after(*, job: Job, after: int, limit: int = 1000) -> QuerySet[JobEvent]:
    return JobEvent.objects.filter(job=job, seq__gt=after).order_by("seq")[:limit]


def job_metric_series(*, job: Job) -> dict[str, list[list[float]]]:
    series: dict[str, list[list[float]]] = {}
    for row in JobMetrics.objects.filter(job=job).order_by("step").values_list("step", "values"):
        step, values = row
        for name, value in values.items():
            series.setdefault(name, []).append([float(step), float(value)])
    return series
