"""A job's estimate before it is submitted: the simulator's forecast of its run (on its own GPUs,
and alone on an idle cluster), its cost at the tenant's price, how long it would wait for
admission, what would refuse or stop it, and how far the tenant's recent estimates landed.

Nothing is written: the spec goes through submit's validation (a bad one raises the same
``SpecInvalid``), the limits submit and admission apply are read without locks, and each
refusal comes back as a reason instead of an error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings

from tenants.models import BudgetAction, Quota, Tenant
from webapp import engine_gateway
from webapp.datasets.services import resolve_dataset_refs
from webapp.jobs.admission import holding_jobs
from webapp.jobs.estimate.accuracy import tenant_record
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.queue_wait import HeldJob, QueuedJob, TenantLimits, queue_wait_s
from webapp.jobs.selectors import submit_cap_counts
from webapp.jobs.services.submit import _validated

logger = logging.getLogger(__name__)

QUEUE_WAIT_METHOD = (
    "admission replayed forward: jobs holding GPUs end when their simulated forecast says, jobs "
    "queued ahead (equal or higher priority) start in order as GPUs free up, and this job starts "
    "once its GPUs are free and its tenant's running-job and GPU limits allow; borrowed GPUs "
    "come back at a step's end when the job is within its tenant's guarantee"
)


def gpu_hour_price(tenant: Tenant) -> tuple[Decimal, str]:
    """(price of one GPU-hour, where it comes from: ``tenant`` or ``default``)."""
    if tenant.gpu_hour_price is not None:
        return tenant.gpu_hour_price, "tenant"
    return Decimal(str(settings.GPU_HOUR_PRICE)), "default"


def job_estimate(*, tenant: Tenant, spec: Mapping[str, Any]) -> dict[str, Any]:
    """What submitting ``spec`` now would cost, take and meet; SpecInvalid for a bad spec."""
    spec = resolve_dataset_refs(tenant, spec)
    resolved = _validated(spec)
    forecast = engine_gateway.forecast_job(spec)
    gpu_hours = forecast["device_seconds"] / 3600.0
    price, price_source = gpu_hour_price(tenant)
    quota = Quota.objects.filter(tenant=tenant).first()
    num_gpus = int(resolved["resources"]["num_gpus"])
    priority = float(resolved["priority"])
    blockers, warnings = _limits_in_the_way(
        tenant=tenant, quota=quota, num_gpus=num_gpus, priority=priority, gpu_hours=gpu_hours
    )
    wait_s, ahead, free = _queue_wait(
        tenant=tenant, quota=quota, num_gpus=num_gpus, priority=priority, forecast=forecast
    )
    if wait_s is None and not blockers:
        blockers.append(
            {
                "code": "quota",
                "field": "spec.resources.num_gpus",
                "message": f"{num_gpus} GPUs is more than your tenant may hold at once "
                "(guarantee + borrow limit): it would wait for ever",
            }
        )
    return {
        "device_type": forecast["device_type"],
        "num_gpus": num_gpus,
        "steps": forecast["steps"],
        "simulated_steps": forecast["simulated_steps"],
        "step_s": forecast["step_s"],
        "first_step_s": forecast["first_step_s"],
        "total_s": forecast["total_s"],
        "gpu_hours": gpu_hours,
        "tokens_per_step": forecast["tokens_per_step"],
        "idle_cluster": {
            "step_s": forecast["idle_cluster"]["step_s"],
            "total_s": forecast["idle_cluster"]["total_s"],
            "gpu_hours": forecast["idle_cluster"]["device_seconds"] / 3600.0,
        },
        "cost": {
            "amount": float(round(Decimal(gpu_hours) * price, 2)),
            "currency": settings.BILLING_CURRENCY,
            "gpu_hour_price": float(price),
            "price_source": price_source,
        },
        "queue": {"wait_s": wait_s, "jobs_ahead": ahead, "gpus_free": free, "method": QUEUE_WAIT_METHOD},
        "blocked": bool(blockers),
        "blockers": blockers,
        "warnings": warnings,
        "record": tenant_record(tenant_id=tenant.pk),
    }


def _limits_in_the_way(
    *, tenant: Tenant, quota: Quota | None, num_gpus: int, priority: float, gpu_hours: float
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(what would refuse the submit or keep the job from ever starting, what would stop it
    part way): the checks of submit and admission, as reasons."""
    if quota is None:
        return [], []
    blockers: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    if num_gpus > quota.max_gpus_per_job:
        blockers.append(
            {
                "code": "quota",
                "field": "spec.resources.num_gpus",
                "message": f"{num_gpus} GPUs; your tenant's limit per job is {quota.max_gpus_per_job}",
            }
        )
    if priority > quota.priority_limit:
        blockers.append(
            {
                "code": "quota",
                "field": "spec.priority",
                "message": f"priority {priority:g} is above your tenant's limit of {quota.priority_limit:g}",
            }
        )
    queued, spent = submit_cap_counts(tenant_id=tenant.pk)
    if queued >= quota.max_queued_jobs:
        blockers.append(
            {
                "code": "quota",
                "field": "",
                "message": f"your tenant already has {queued} queued jobs (limit {quota.max_queued_jobs})",
            }
        )
    budget = quota.monthly_gpu_hours
    if spent >= budget:
        blockers.append(
            {
                "code": "budget",
                "field": "",
                "message": f"your tenant has used {spent:.1f} of its {budget:g} GPU-hours this month",
            }
        )
    elif spent + gpu_hours > budget:
        left = budget - spent
        if quota.budget_action == BudgetAction.PAUSE:
            blockers.append(
                {
                    "code": "budget",
                    "field": "",
                    "message": f"it needs about {gpu_hours:.1f} GPU-hours and {left:.1f} are left this month: "
                    "it would be paused once they are spent",
                }
            )
        else:
            warnings.append(
                {
                    "code": "budget",
                    "field": "",
                    "message": f"it needs about {gpu_hours:.1f} GPU-hours and {left:.1f} are left this month: "
                    "new jobs would be refused after it",
                }
            )
    return blockers, warnings


def _queue_wait(
    *, tenant: Tenant, quota: Quota | None, num_gpus: int, priority: float, forecast: Mapping[str, Any]
) -> tuple[float | None, int, int]:
    """(engine seconds until admission or None, jobs queued ahead, GPUs free now)."""
    device_type, capacity = engine_gateway.cluster_capacity()
    fields = ("id", "tenant_id", "num_gpus", "spec", "start_step", "current_step", "borrowed", "priority")
    held_jobs = list(holding_jobs().only(*fields))
    ahead_jobs = list(
        Job.objects.filter(status=JobStatus.QUEUED, admitted_at__isnull=True)
        .filter(priority__gte=priority)
        .only(*fields, "created_at")
        .order_by("-priority", "created_at", "id")
    )
    held = []
    for job in held_jobs:
        found = _forecast_of(job)
        done = max(0, job.current_step - job.start_step)
        held.append(
            HeldJob(
                tenant_id=job.tenant_id,
                num_gpus=job.num_gpus,
                remaining_s=max(0.0, found["total_s"] - done * found["step_s"]),
                borrowed=job.borrowed,
                step_s=found["step_s"],
            )
        )
    ahead = [QueuedJob(j.tenant_id, j.num_gpus, _forecast_of(j)["total_s"]) for j in ahead_jobs]
    limits = None
    if quota is not None:
        guaranteed = quota.guaranteed_for(device_type)
        limits = TenantLimits(quota.max_running_jobs, guaranteed + quota.borrow_limit_gpus, guaranteed)
    wait = queue_wait_s(
        capacity=capacity,
        held=held,
        ahead=ahead,
        job=QueuedJob(tenant.pk, num_gpus, float(forecast["total_s"])),
        limits=limits,
    )
    return wait, len(ahead), capacity - sum(h.num_gpus for h in held)


def _forecast_of(job: Job) -> Mapping[str, Any]:
    """A stored job's forecast; one that no longer simulates (its spec predates a change of
    the engine) counts as ending now, so one odd job does not fail every estimate."""
    try:
        return engine_gateway.forecast_job(job.spec)
    except Exception:
        logger.warning("no forecast for job %s; its queue time counts as zero", job.pk, exc_info=True)
        return {"total_s": 0.0, "step_s": 0.0}
