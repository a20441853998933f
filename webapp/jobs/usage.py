"""The usage ledger: GPU-seconds per job and device type, the month's total (which never
decays: budgets) and each tenant's decayed usage (which does: fair share)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Max, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from tenants.models import Tenant
from webapp.jobs.models import TenantShare, UsageRecord

FAIR_SHARE_HALF_LIFE_S = 6 * 3600.0
"""Usage older than this counts half as much when tenants are ranked for fair share."""


def _decay(value: float, since: datetime, now: datetime) -> float:
    age_s = max(0.0, (now - since).total_seconds())
    return value * 0.5 ** (age_s / FAIR_SHARE_HALF_LIFE_S)


def usage_record_many(*, rows: Sequence[UsageRecord]) -> list[UsageRecord]:
    """Append the ledger rows (unsaved, with positive ``gpu_seconds``) whose ``source`` was not
    billed before, in one INSERT, and fold them into each tenant's decayed usage; returns the
    rows appended, for the caller to add to its jobs' totals.

    The caller serialises billing of these sources (the engine cursor's row lock: a source
    names the engine and its event), so reading which are billed cannot race; were one billed
    meanwhile, the unique ``source`` would fail the caller's transaction, to be retried whole."""
    if not rows:
        return []
    billed = set(UsageRecord.objects.filter(source__in=[r.source for r in rows]).values_list("source", flat=True))
    fresh = []
    for row in rows:
        if row.source not in billed:
            billed.add(row.source)
            fresh.append(row)
    UsageRecord.objects.bulk_create(fresh)
    by_tenant: dict[int, float] = {}
    for row in fresh:
        by_tenant[row.tenant_id] = by_tenant.get(row.tenant_id, 0.0) + row.gpu_seconds
    # Decayed once per batch with its sum: the same as per row, but for the few milliseconds
    # of decay between rows (the half-life is hours).
    now = timezone.now()
    for tenant_id in sorted(by_tenant):  # one lock order for every biller
        share, _ = TenantShare.objects.select_for_update().get_or_create(tenant_id=tenant_id)
        share.decayed_gpu_seconds = _decay(share.decayed_gpu_seconds, share.updated_at, now) + by_tenant[tenant_id]
        share.updated_at = now
        share.save(update_fields=["decayed_gpu_seconds", "updated_at"])
    return fresh


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
        {
            "job": str(r["job_uuid"]),
            "name": r["name"],
            "device_type": r["device_type"],
            "gpu_hours": r["s"] / 3600.0,
            "deleted": r["job_id"] is None,
        }
        for r in rows.values("job_uuid", "job_id", "device_type")
        .annotate(s=Sum("gpu_seconds"), name=Max(Coalesce("job__name", "job_name")))
        .order_by("-s")
    ]
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "gpu_hours": sum(by_type.values()),
        "by_device_type": by_type,
        "by_job": by_job,
    }
