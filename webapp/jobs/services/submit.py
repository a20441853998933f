"""Creating jobs (submit, clone) and editing what their owners may change (name, tags,
priority). A refused submit raises before anything is written; a stored one is ``queued``, and
an admission pass soon after its commit gives it capacity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from tenants.models import Quota, Tenant
from webapp import engine_gateway
from webapp.datasets.services import resolve_dataset_refs
from webapp.jobs import task_queue
from webapp.jobs.errors import BudgetExhausted, QuotaExceeded, SpecInvalid
from webapp.jobs.journal import JobJournal, append_event
from webapp.jobs.models import EventKind, Job, JobCheckpoint, JobStatus
from webapp.jobs.selectors import submit_cap_counts


def _check_submit_caps(*, tenant: Tenant, num_gpus: int, priority: float) -> None:
    """Hard caps, checked at submit under the quota's row lock (concurrent submits queue up
    here, so none can overshoot ``max_queued_jobs``)."""
    quota = Quota.objects.select_for_update().filter(tenant=tenant).first()
    if quota is None:
        return
    if num_gpus > quota.max_gpus_per_job:
        raise QuotaExceeded(
            f"this job asks for {num_gpus} GPUs; your tenant's limit per job is {quota.max_gpus_per_job}",
            [
                {
                    "field": "spec.resources.num_gpus",
                    "message": f"must be <= {quota.max_gpus_per_job} (quota max_gpus_per_job), got {num_gpus}",
                }
            ],
        )
    if priority > quota.priority_limit:
        raise QuotaExceeded(
            f"priority {priority:g} is above your tenant's limit of {quota.priority_limit:g}",
            [{"field": "spec.priority", "message": f"must be <= {quota.priority_limit:g} (quota priority_limit)"}],
        )
    waiting, spent = submit_cap_counts(tenant_id=tenant.pk)  # read once the lock is held
    if spent >= quota.monthly_gpu_hours:
        raise BudgetExhausted(
            f"your tenant has used {spent:.1f} of its {quota.monthly_gpu_hours:g} GPU-hours this month; "
            "ask an admin to raise monthly_gpu_hours or wait for the next month"
        )
    if waiting >= quota.max_queued_jobs:
        raise QuotaExceeded(
            f"your tenant already has {waiting} queued jobs (limit {quota.max_queued_jobs}); "
            "cancel one or wait for one to start"
        )


def _validated(spec: Mapping[str, Any], field_prefix: str = "spec") -> dict[str, Any]:
    problems = engine_gateway.validate_spec(spec)
    if problems:
        raise SpecInvalid(
            "the job spec is invalid",
            [{"field": f"{field_prefix}.{p.field}", "message": p.message} for p in problems],
        )
    return engine_gateway.resolve_spec(spec)


def _create_job(
    *, tenant: Tenant, user: Any, name: str, spec: Mapping[str, Any], resolved: dict[str, Any], **extra: Any
) -> Job:
    num_gpus = int(resolved["resources"]["num_gpus"])
    priority = float(resolved["priority"])
    device_type, _ = engine_gateway.cluster_capacity()
    _check_submit_caps(tenant=tenant, num_gpus=num_gpus, priority=priority)
    job = Job(
        tenant=tenant,
        created_by=user if getattr(user, "pk", None) else None,
        name=name or resolved["name"],
        spec=dict(spec),
        resolved_spec=resolved,
        num_gpus=num_gpus,
        device_type=device_type,
        engine_mode=engine_gateway.engine_mode(),  # the mode its spec was checked for, and runs in
        priority=priority,
        total_steps=int(resolved["trainer"]["total_steps"]),
        status_reason="waiting for admission",
        **extra,
    )
    journal = JobJournal()  # the first event is numbered before the INSERT, which stores its seq
    journal.append(job, EventKind.STATUS, {"status": JobStatus.QUEUED, "reason": job.status_reason})
    job.save(force_insert=True)
    journal.flush(inserted=job)
    task_queue.admission_pass_soon()
    return job


def job_submit(*, tenant: Tenant, user: Any, name: str, spec: Mapping[str, Any]) -> Job:
    """Validate, store as ``queued``; the admission pass (right after commit) gives it capacity."""
    spec = resolve_dataset_refs(tenant, spec)  # data.train_files "dataset:<name>" -> the stored file
    resolved = _validated(spec)
    # No savepoint: a refused submit raises before writing anything, and a caller's transaction
    # (the API's, which stores the idempotent response with the job) ends with the exception.
    with transaction.atomic(savepoint=False):
        return _create_job(tenant=tenant, user=user, name=name, spec=spec, resolved=resolved)


def _merged(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def job_clone(*, job: Job, user: Any, checkpoint_step: int | None, overrides: Mapping[str, Any], name: str = "") -> Job:
    """A new job from ``job``'s spec with ``overrides``, starting after a checkpoint of it."""
    checkpoints = list(JobCheckpoint.objects.filter(job=job).values_list("step", flat=True))
    spec = _merged(job.spec, overrides)
    trainer = dict(spec.get("trainer") or {})
    trainer.pop("start_step", None)
    if checkpoint_step is None:  # the latest checkpoint that leaves steps to train
        total = int(_validated({**spec, "trainer": trainer}, field_prefix="overrides")["trainer"]["total_steps"])
        checkpoint_step = max((c for c in checkpoints if c < total), default=0)
    elif checkpoint_step != 0 and checkpoint_step not in checkpoints:
        raise SpecInvalid(
            f"job {job.name} has no checkpoint at step {checkpoint_step}",
            [
                {
                    "field": "checkpoint_step",
                    "message": f"must be one of {sorted(checkpoints) or 'none yet'} (or 0: from scratch)",
                }
            ],
        )
    if checkpoint_step:
        trainer["start_step"] = checkpoint_step
    spec["trainer"] = trainer
    spec = dict(resolve_dataset_refs(job.tenant, spec, field_prefix="overrides"))
    resolved = _validated(spec, field_prefix="overrides")
    with transaction.atomic():
        clone = _create_job(
            tenant=job.tenant,
            user=user,
            name=name or f"{job.name} (clone)",
            spec=spec,
            resolved=resolved,
            cloned_from=job,
            start_step=checkpoint_step,
            current_step=checkpoint_step,
            tags=list(job.tags),
        )
    return clone


def job_patch(*, job: Job, changes: Mapping[str, Any]) -> Job:
    """Rename, retag or reprioritise (within the tenant's ``priority_limit``)."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        fields = []
        if "priority" in changes:
            quota = Quota.objects.filter(tenant_id=locked.tenant_id).first()
            limit = quota.priority_limit if quota else 1.0
            if changes["priority"] > limit:
                raise QuotaExceeded(
                    f"priority {changes['priority']:g} is above your tenant's limit of {limit:g}",
                    [{"field": "priority", "message": f"must be <= {limit:g} (quota priority_limit)"}],
                )
        for name in ("name", "tags", "priority"):
            if name in changes:
                setattr(locked, name, changes[name])
                fields.append(name)
        if fields:
            locked.save(update_fields=fields)
            append_event(locked, EventKind.LOG, {"level": "info", "message": f"changed {', '.join(fields)}"})
            if "priority" in fields and locked.status == JobStatus.QUEUED:
                task_queue.admission_pass_soon()
    return locked
