"""A job's estimate before it is submitted: the simulator's forecast of its run (on its own GPUs,
and alone on an idle cluster), its cost at the tenant's price, how long it would wait for
admission, what would refuse or stop it, and how far the tenant's recent estimates landed.

Nothing is written: the spec goes through submit's validation (a bad one raises the same
``SpecInvalid``), the limits submit and admission apply are read without locks, and each
refusal comes back as a reason instead of an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings

from tenants.models import BudgetAction, Quota, Tenant
from webapp import engine_gateway
from webapp.datasets.services import resolve_dataset_refs
from webapp.jobs.admission import holding_jobs, tenant_state
from webapp.jobs.estimate.accuracy import tenant_record
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.selectors import submit_cap_counts
from webapp.jobs.services.lifecycle import RECLAIM_REASON
from webapp.jobs.services.submit import _validated
from webapp.jobs.usage import FAIR_SHARE_HALF_LIFE_S

logger = logging.getLogger(__name__)

QUEUE_WAIT_METHOD = (
    "admission replayed forward: the service's own admission pass (priority, fair share, every "
    "tenant's limits, reclaims of borrowed GPUs at a checkpoint) runs at now and whenever a job "
    "holding GPUs would end by its simulated forecast, over every queued job and this one"
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
    wait, ahead, free = _queue_wait(tenant=tenant, num_gpus=num_gpus, priority=priority)
    if wait.wait_s is None and not blockers:
        code, detail = wait.reason or ("capacity", "no admission pass would admit it")
        blockers.append(
            {
                # The API's two codes: a job ahead that never starts holds it back as a limit would.
                "code": "budget" if code == "budget" else "quota",
                "field": "spec.resources.num_gpus" if code in ("quota", "capacity") else "",
                "message": f"it would wait for ever: {detail}",
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
        "queue": {
            "wait_s": wait.wait_s,
            "jobs_ahead": ahead,
            "gpus_free": free,
            "method": QUEUE_WAIT_METHOD,
        },
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


def _queue_wait(*, tenant: Tenant, num_gpus: int, priority: float) -> tuple[engine_gateway.AdmissionWait, int, int]:
    """(the engine's admission replayed forward for this job, queued jobs of equal or higher
    priority, GPUs free now); engine seconds."""
    device_type, capacity = engine_gateway.cluster_capacity()
    fields = ("id", "tenant_id", "num_gpus", "spec", "start_step", "current_step", "borrowed", "priority")
    held_jobs = list(holding_jobs().only(*fields, "created_at", "admitted_at", "status", "status_reason"))
    queued_jobs = list(
        Job.objects.filter(status=JobStatus.QUEUED, admitted_at__isnull=True)
        .only(*fields, "created_at")
        .order_by("created_at", "id")
    )
    held = []
    for job in held_jobs:
        found = _forecast_of(job)
        done = max(0, job.current_step - job.start_step)
        remaining_s = max(0.0, found["total_s"] - done * found["step_s"])
        pausing = job.status == JobStatus.PAUSING
        reclaimed = pausing and job.status_reason.startswith(RECLAIM_REASON)
        if pausing and not reclaimed:
            remaining_s = min(remaining_s, found["step_s"])  # it stops at its next checkpoint
        held.append(
            engine_gateway.ForecastJob(
                job=_admission_job(job),
                remaining_s=remaining_s,
                step_s=found["step_s"],
                admitted_s=job.admitted_at.timestamp() if job.admitted_at else 0.0,
                borrowed=job.borrowed,
                pausing=reclaimed,
            )
        )
    queued = []
    for job in queued_jobs:
        found = _forecast_of(job)
        queued.append(
            engine_gateway.ForecastJob(job=_admission_job(job), remaining_s=found["total_s"], step_s=found["step_s"])
        )
    state = tenant_state(queued_tenant_ids={tenant.pk, *(j.tenant_id for j in queued_jobs)}, device_type=device_type)
    wait = engine_gateway.admission_wait(
        capacity_gpus=capacity,
        device_type=device_type,
        tenants=state.usage,
        held=held,
        queued=queued,
        job=engine_gateway.QueuedJob(
            job_id="estimate", tenant=tenant.pk, num_gpus=num_gpus, priority=priority, created_s=time.time()
        ),
        half_life_s=FAIR_SHARE_HALF_LIFE_S,
    )
    ahead = sum(1 for j in queued_jobs if j.priority >= priority)
    return wait, ahead, capacity - sum(j.num_gpus for j in held_jobs)


def _admission_job(job: Job) -> engine_gateway.QueuedJob:
    return engine_gateway.QueuedJob(
        job_id=str(job.pk),
        tenant=job.tenant_id,
        num_gpus=job.num_gpus,
        priority=job.priority,
        created_s=job.created_at.timestamp(),
    )


def _forecast_of(job: Job) -> Mapping[str, Any]:
    """A stored job's forecast; one that no longer simulates (its spec predates a change of
    the engine) counts as ending now, so one odd job does not fail every estimate."""
    try:
        return engine_gateway.forecast_job(job.spec)
    except Exception:
        logger.warning("no forecast for job %s; its queue time counts as zero", job.pk, exc_info=True)
        return {"total_s": 0.0, "step_s": 0.0}
