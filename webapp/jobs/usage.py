"""The usage ledger: GPU-seconds per job and device type, the month's total (which never
decays: budgets) and each tenant's decayed usage (which does: fair share)."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from tenants.models import Tenant
from webapp.jobs.models import Job, TenantShare, UsageRecord

FAIR_SHARE_HALF_LIFE_S = 6 * 3600.0
"""Usage older than this counts half as much when tenants are ranked for fair share."""


def _decay(value: float, since: datetime, now: datetime) -> float:
    age_s = max(0.0, (now - since).total_seconds())
    return value * 0.5 ** (age_s / FAIR_SHARE_HALF_LIFE_S)


def usage_record(*, job: Job, gpu_seconds: float, step: int | None, source: str) -> bool:
    """Append a ledger row and fold it into the job's total and the tenant's decayed usage;
    an event already billed (same ``source``) is skipped. The caller holds the job's row lock."""
    if gpu_seconds <= 0:
        return False
    now = timezone.now()
    try:
        with transaction.atomic():
            UsageRecord.objects.create(
                job=job,
                tenant_id=job.tenant_id,
                device_type=job.device_type,
                gpu_seconds=gpu_seconds,
                step=step,
                source=source,
            )
    except IntegrityError:
        return False
    job.gpu_seconds += gpu_seconds
    Job.objects.filter(pk=job.pk).update(gpu_seconds=job.gpu_seconds)
    share, _ = TenantShare.objects.select_for_update().get_or_create(tenant_id=job.tenant_id)
    share.decayed_gpu_seconds = _decay(share.decayed_gpu_seconds, share.updated_at, now) + gpu_seconds
    share.updated_at = now
    share.save(update_fields=["decayed_gpu_seconds", "updated_at"])
    return True


def month_start(now: datetime | None = None) -> datetime:
    now = now or timezone.now()
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_gpu_hours(*, tenant_ids: list[int] | None = None, now: datetime | None = None) -> dict[int, float]:
    """GPU-hours each tenant used since the first of this month (UTC)."""
    rows = UsageRecord.objects.filter(created_at__gte=month_start(now))
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    totals = rows.values("tenant_id").annotate(s=Sum("gpu_seconds")).values_list("tenant_id", "s")
    return {tid: float(s or 0.0) / 3600.0 for tid, s in totals}


def decayed_gpu_seconds(*, tenant_ids: list[int], now: datetime | None = None) -> dict[int, float]:
    now = now or timezone.now()
    shares = TenantShare.objects.filter(tenant_id__in=tenant_ids)
    return {s.tenant_id: _decay(s.decayed_gpu_seconds, s.updated_at, now) for s in shares}


def usage_summary(*, tenant: Tenant, since: datetime, until: datetime) -> dict[str, object]:
    """The ledger for one tenant and period: totals by device type and by job."""
    rows = UsageRecord.objects.filter(tenant=tenant, created_at__gte=since, created_at__lt=until)
    by_type = {
        r["device_type"]: r["s"] / 3600.0
        for r in rows.values("device_type").annotate(s=Sum("gpu_seconds")).order_by("device_type")
    }
    by_job = [
        {"job": str(r["job_id"]), "name": r["job__name"], "device_type": r["device_type"], "gpu_hours": r["s"] / 3600.0}
        for r in rows.values("job_id", "job__name", "device_type").annotate(s=Sum("gpu_seconds")).order_by("-s")
    ]
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "gpu_hours": sum(by_type.values()),
        "by_device_type": by_type,
        "by_job": by_job,
    }
