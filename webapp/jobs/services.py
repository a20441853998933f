"""Writes for jobs. Every status change is a guarded update plus a numbered job event, in one
transaction; side effects (Celery, channel layer) are sent on commit."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from tenants.models import Quota, Tenant
from webapp import engine_gateway
from webapp.jobs.errors import QuotaExceeded, SpecInvalid
from webapp.jobs.models import (
    TERMINAL_STATUSES,
    TRANSITIONS,
    EngineCursor,
    EventKind,
    Job,
    JobEvent,
    JobMetrics,
    JobStatus,
)
from webapp.jobs.realtime import publish_job_event_on_commit

logger = logging.getLogger(__name__)


def event_payload(event: JobEvent) -> dict[str, Any]:
    return {"seq": event.seq, "kind": event.kind, "created_at": event.created_at.isoformat(), "data": event.data}


def _append_event(job: Job, kind: str, data: dict[str, Any]) -> JobEvent:
    """Caller holds the job's row lock (or just created it), so seq numbers never collide."""
    job.last_event_seq += 1
    Job.objects.filter(pk=job.pk).update(last_event_seq=job.last_event_seq)
    event = JobEvent.objects.create(job=job, seq=job.last_event_seq, kind=kind, data=data)
    publish_job_event_on_commit(job_id=job.pk, tenant_id=job.tenant_id, event=event_payload(event))
    return event


# -- submit -----------------------------------------------------------------------------------
def _check_quota_caps(*, tenant: Tenant, num_gpus: int) -> None:
    quota = Quota.objects.filter(tenant=tenant).first()
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
    waiting = Job.objects.filter(tenant=tenant, status=JobStatus.QUEUED).count()
    if waiting >= quota.max_queued_jobs:
        raise QuotaExceeded(
            f"your tenant already has {waiting} queued jobs (limit {quota.max_queued_jobs}); "
            "cancel one or wait for one to start"
        )


def job_submit(*, tenant: Tenant, user: Any, name: str, spec: Mapping[str, Any]) -> Job:
    """Validate, store as ``queued`` and hand to a worker once the row is committed."""
    problems = engine_gateway.validate_spec(spec)
    if problems:
        raise SpecInvalid(
            "the job spec is invalid",
            [{"field": f"spec.{p.field}", "message": p.message} for p in problems],
        )
    resolved = engine_gateway.resolve_spec(spec)
    num_gpus = int(resolved["resources"]["num_gpus"])
    with transaction.atomic():
        _check_quota_caps(tenant=tenant, num_gpus=num_gpus)
        job = Job.objects.create(
            tenant=tenant,
            created_by=user if getattr(user, "pk", None) else None,
            name=name or resolved["name"],
            spec=dict(spec),
            resolved_spec=resolved,
            num_gpus=num_gpus,
            total_steps=int(resolved["trainer"]["total_steps"]),
            status_reason="waiting for dispatch",
        )
        _append_event(job, EventKind.STATUS, {"status": JobStatus.QUEUED, "reason": job.status_reason})
        from webapp.jobs.tasks import dispatch_job

        job_id = str(job.pk)
        transaction.on_commit(lambda: dispatch_job.delay(job_id))
    return job


# -- transitions ------------------------------------------------------------------------------
def job_transition(
    *, job_id: Any, to: str, reason: str = "", failure_class: str = "", allow_same: bool = False
) -> bool:
    """Move a job to ``to`` if the state machine allows it; False (and nothing written) if not."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            return False
        if job.status == to and allow_same:
            if reason and reason != job.status_reason:
                job.status_reason = reason
                job.save(update_fields=["status_reason"])
                _append_event(job, EventKind.STATUS, {"status": to, "reason": reason})
            return True
        if to not in TRANSITIONS[job.status]:
            logger.info("job %s: ignoring %s -> %s", job_id, job.status, to)
            return False
        job.status = to
        job.status_reason = reason
        fields = ["status", "status_reason"]
        now = timezone.now()
        if to == JobStatus.RUNNING and job.started_at is None:
            job.started_at = now
            fields.append("started_at")
        if to in TERMINAL_STATUSES:
            job.finished_at = now
            fields.append("finished_at")
        if failure_class:
            job.failure_class = failure_class
            fields.append("failure_class")
        job.save(update_fields=fields)
        data = {"status": to, "reason": reason}
        if failure_class:
            data["failure_class"] = failure_class
        _append_event(job, EventKind.STATUS, data)
        return True


def job_cancel(*, job: Job) -> Job:
    """Ask for a cancel: ``cancelling`` now, ``cancelled`` once the engine has stopped it."""
    from webapp.jobs.errors import InvalidTransition
    from webapp.jobs.tasks import cancel_job

    if job.is_terminal:
        raise InvalidTransition(f"job is already {job.status}; nothing to cancel")
    with transaction.atomic():
        if job_transition(job_id=job.pk, to=JobStatus.CANCELLING, reason="cancel requested"):
            job_id = str(job.pk)
            transaction.on_commit(lambda: cancel_job.delay(job_id))
    job.refresh_from_db()
    return job


# -- engine events ----------------------------------------------------------------------------
_ENGINE_TO_JOB = {
    "queued": JobStatus.QUEUED,
    "starting": JobStatus.STARTING,
    "running": JobStatus.RUNNING,
    "succeeded": JobStatus.SUCCEEDED,
    "failed": JobStatus.FAILED,
    "cancelled": JobStatus.CANCELLED,
}


def _apply_engine_event(event: engine_gateway.EngineEvent) -> None:
    if event.kind is engine_gateway.EventKind.STATUS:
        to = _ENGINE_TO_JOB[str(event.data["status"])]
        reason = str(event.data.get("reason", ""))
        if to == JobStatus.QUEUED:
            reason = f"capacity: {reason}"
        failure_class = "system" if to == JobStatus.FAILED else ""
        job_transition(job_id=event.pipeline_id, to=to, reason=reason, failure_class=failure_class, allow_same=True)
    elif event.kind is engine_gateway.EventKind.METRICS:
        _store_metrics(event.pipeline_id, int(event.data["step"]), dict(event.data["metrics"]))
    elif event.kind is engine_gateway.EventKind.LOG:
        job = Job.objects.select_for_update().filter(pk=event.pipeline_id).first()
        if job is not None:
            _append_event(job, EventKind.LOG, dict(event.data))


def _store_metrics(job_id: str, step: int, values: dict[str, float]) -> None:
    job = Job.objects.select_for_update().filter(pk=job_id).first()
    if job is None:
        return
    try:
        with transaction.atomic():
            JobMetrics.objects.create(job=job, step=step, values=values)
    except IntegrityError:
        return  # already stored: ingestion is at-least-once, storage exactly-once
    if step > job.current_step:
        job.current_step = step
        job.save(update_fields=["current_step"])
    _append_event(job, EventKind.METRICS, {"step": step, "total_steps": job.total_steps, "metrics": values})


def engine_events_ingest(*, engine_id: str, events: Iterable[engine_gateway.EngineEvent], next_cursor: int) -> int:
    """Store events past the saved cursor and advance it, atomically; returns how many."""
    with transaction.atomic():
        cursor, _ = EngineCursor.objects.select_for_update().get_or_create(engine_id=engine_id)
        applied = 0
        for event in events:
            if event.seq <= cursor.cursor:
                continue  # another pump stored it first
            _apply_engine_event(event)
            applied += 1
        if next_cursor > cursor.cursor:
            cursor.cursor = next_cursor
            cursor.save(update_fields=["cursor", "updated_at"])
    return applied


def engine_events_pump(*, max_batches: int = 20, batch_size: int = 500) -> int:
    """Pull and store everything the engine has produced since the saved cursor."""
    total = 0
    for _ in range(max_batches):
        engine_id = engine_gateway.engine_host().engine_id
        saved = EngineCursor.objects.filter(engine_id=engine_id).values_list("cursor", flat=True).first() or 0
        engine_id, events, next_cursor = engine_gateway.pull_events(cursor=saved, limit=batch_size)
        if not events:
            break
        total += engine_events_ingest(engine_id=engine_id, events=events, next_cursor=next_cursor)
    return total
