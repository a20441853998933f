"""Reads for jobs. Every tenant-facing read goes through a tenant filter."""

from __future__ import annotations

from typing import Any

from django.db.models import Case, Count, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce

from tenants.models import Tenant
from webapp.jobs.models import EventKind, Job, JobCheckpoint, JobEvent, JobMetrics, JobStatus


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
    # Only queued rows need a position: CASE keeps Postgres from counting for the others.
    position = Case(
        When(status=JobStatus.QUEUED, then=Coalesce(Subquery(ahead, output_field=IntegerField()), 0)),
        default=Value(None),
        output_field=IntegerField(),
    )
    return Job.objects.filter(tenant=tenant).select_related("tenant").annotate(queued_ahead=position)


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


def job_metric_series(
    *, job: Job, names: list[str] | None = None, max_points: int | None = None
) -> dict[str, list[list[float]]]:
    """``{metric: [[step, value], ...]}``, optionally only ``names``, each series downsampled
    to ``max_points`` on the server so a long run does not ship every step."""
    series: dict[str, list[list[float]]] = {}
    for row in JobMetrics.objects.filter(job=job).order_by("step").values_list("step", "values"):
        step, values = row
        for name, value in values.items():
            if names is None or name in names:
                series.setdefault(name, []).append([float(step), float(value)])
    if max_points is not None:
        series = {name: downsample(points, max_points) for name, points in series.items()}
    return series


def job_logs_after(*, job: Job, after: int, limit: int = 1000) -> list[dict[str, Any]]:
    events = JobEvent.objects.filter(job=job, kind=EventKind.LOG, seq__gt=after).order_by("seq")[:limit]
    return [
        {
            "seq": e.seq,
            "created_at": e.created_at.isoformat(),
            "level": str(e.data.get("level", "info")),
            "message": str(e.data.get("message", "")),
        }
        for e in events
    ]


def job_checkpoints(*, job: Job) -> QuerySet[JobCheckpoint]:
    return JobCheckpoint.objects.filter(job=job).order_by("step")


def downsample(points: list[list[float]], max_points: int) -> list[list[float]]:
    """Largest-triangle-three-buckets: at most ``max_points`` points that keep a curve's shape
    (its spikes and turns), first and last points exact."""
    n = len(points)
    if max_points >= n or max_points < 3:
        return points if max_points >= n else [points[0], points[-1]][: max(max_points, 1)]
    out = [points[0]]
    bucket = (n - 2) / (max_points - 2)
    a = 0
    for i in range(max_points - 2):
        lo, hi = int(i * bucket) + 1, int((i + 1) * bucket) + 1
        nxt_lo, nxt_hi = hi, min(int((i + 2) * bucket) + 1, n)
        nxt = points[nxt_lo:nxt_hi] or [points[-1]]
        avg_x = sum(p[0] for p in nxt) / len(nxt)
        avg_y = sum(p[1] for p in nxt) / len(nxt)
        ax, ay = points[a]
        best, best_area = lo, -1.0
        for j in range(lo, hi):
            x, y = points[j]
            area = abs((ax - avg_x) * (y - ay) - (ax - x) * (avg_y - ay))
            if area > best_area:
                best, best_area = j, area
        out.append(points[best])
        a = best
    out.append(points[-1])
    return out
