"""Writes for jobs. Every status change is a guarded update plus a numbered job event, in one
transaction; side effects (Celery, channel layer) are sent on commit."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from tenants.models import Quota, Tenant
from webapp import engine_gateway
from webapp.datasets.services import resolve_dataset_refs
from webapp.jobs.errors import BudgetExhausted, InvalidTransition, QuotaExceeded, SpecInvalid
from webapp.jobs.journal import JobJournal
from webapp.jobs.journal import event_payload as event_payload  # streams render stored events with it
from webapp.jobs.models import (
    TERMINAL_STATUSES,
    TRANSITIONS,
    EngineCursor,
    EventKind,
    Job,
    JobCheckpoint,
    JobEvent,
    JobMetrics,
    JobStatus,
    UsageRecord,
)
from webapp.jobs.selectors import submit_cap_counts
from webapp.jobs.usage import usage_record_many

logger = logging.getLogger(__name__)


def _append_event(job: Job, kind: str, data: dict[str, Any]) -> JobEvent:
    """Caller holds the job's row lock (or just created it), so seq numbers never collide."""
    journal = JobJournal()
    event = journal.append(job, kind, data)
    journal.flush()
    return event


# -- submit -----------------------------------------------------------------------------------
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
        priority=priority,
        total_steps=int(resolved["trainer"]["total_steps"]),
        status_reason="waiting for admission",
        **extra,
    )
    journal = JobJournal()  # the first event is numbered before the INSERT, which stores its seq
    journal.append(job, EventKind.STATUS, {"status": JobStatus.QUEUED, "reason": job.status_reason})
    job.save(force_insert=True)
    journal.flush(inserted=job)
    _admit_soon()
    return job


ADMIT_SOON_KEY = "jobs:admission-soon"


def _admit_soon() -> None:
    """One admission pass soon after this commits; a burst of submits shares one (a pass
    started before this commit misses it, and beat's next pass, within seconds, takes it)."""
    from webapp.jobs.tasks import admission_tick

    def send() -> None:
        if cache.add(ADMIT_SOON_KEY, 1, timeout=1):
            admission_tick.delay()

    transaction.on_commit(send)


def latest_checkpoint_step(job: Job) -> int:
    if hasattr(job, "latest_checkpoint"):  # read with the job (``job_for_dispatch``)
        latest = job.latest_checkpoint
    else:
        latest = JobCheckpoint.objects.filter(job=job).order_by("-step").values_list("step", flat=True).first()
    return max(job.start_step, latest or 0)


def job_for_dispatch(job_id: Any) -> Job | None:
    """The job with its latest checkpoint's step (``engine_spec`` needs both) in one query."""
    latest = JobCheckpoint.objects.filter(job=OuterRef("pk")).order_by("-step").values("step")[:1]
    return Job.objects.filter(pk=job_id).annotate(latest_checkpoint=Subquery(latest)).first()


def engine_spec(job: Job) -> dict[str, Any]:
    """The spec the engine gets: the stored one, started after the job's latest checkpoint."""
    start = latest_checkpoint_step(job)
    spec = dict(job.spec)
    if start and start < job.total_steps:
        spec["trainer"] = {**dict(spec.get("trainer") or {}), "start_step": start}
    return spec


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
            _append_event(locked, EventKind.LOG, {"level": "info", "message": f"changed {', '.join(fields)}"})
            if "priority" in fields and locked.status == JobStatus.QUEUED:
                _admit_soon()
    return locked


# -- admission ---------------------------------------------------------------------------------
def _lock_if_waiting(job: Job) -> Job | None:
    """``job``'s row, locked, if it is still queued and not admitted; None if it has moved on
    (a cancel or pause got there first) or another transaction holds it (the next pass retries)."""
    return (
        Job.objects.select_for_update(skip_locked=True)
        .filter(pk=job.pk, status=JobStatus.QUEUED, admitted_at__isnull=True)
        .only("id", "tenant_id", "status_reason", "last_event_seq", "attempt")
        .first()
    )


def job_set_queue_reason(*, job: Job, code: str, detail: str) -> bool:
    """Record why a queued job waits: nothing is written while the text stays the same, and
    an event only when the reason's code changes. Returns whether the reason was written."""
    reason = f"{code}: {detail}"
    if job.status_reason == reason:
        return False
    with transaction.atomic(savepoint=False):
        locked = _lock_if_waiting(job)
        if locked is None:
            return False
        previous_code = locked.status_reason.split(":", 1)[0]
        locked.status_reason = job.status_reason = reason
        journal = JobJournal()
        journal.touch(locked, "status_reason")
        if previous_code != code:
            journal.append(locked, EventKind.STATUS, {"status": JobStatus.QUEUED, "reason": reason})
        journal.flush()
    return True


def job_admit(*, job: Job, borrowed: bool) -> bool:
    """Give a queued job its capacity and hand it to the engine once this commits; False (and
    nothing written) if it is no longer waiting."""
    from webapp.jobs.tasks import dispatch_job

    with transaction.atomic(savepoint=False):
        locked = _lock_if_waiting(job)
        if locked is None:
            return False
        locked.admitted_at = timezone.now()
        locked.borrowed = borrowed
        locked.attempt += 1
        locked.status_reason = "admitted" + (" on borrowed capacity" if borrowed else "") + "; starting on the engine"
        journal = JobJournal()  # the fields and the event's seq in one UPDATE
        journal.touch(locked, "admitted_at", "borrowed", "attempt", "status_reason")
        journal.append(locked, EventKind.STATUS, {"status": JobStatus.QUEUED, "reason": locked.status_reason})
        journal.flush()
        job_id = str(job.pk)
        transaction.on_commit(lambda: dispatch_job.delay(job_id))
    for name in ("admitted_at", "borrowed", "attempt", "status_reason", "last_event_seq"):
        setattr(job, name, getattr(locked, name))
    return True


# -- transitions ------------------------------------------------------------------------------
def job_transition(
    *, job_id: Any, to: str, reason: str = "", failure_class: str = "", allow_same: bool = False
) -> bool:
    """Move a job to ``to`` if the state machine allows it; False (and nothing written) if not."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            return False
        journal = JobJournal()
        moved = _transition(journal, job, to=to, reason=reason, failure_class=failure_class, allow_same=allow_same)
        journal.flush()
        return moved


def _transition(journal: JobJournal, job: Job, *, to: str, reason: str, failure_class: str, allow_same: bool) -> bool:
    """``job_transition`` on a job whose row the caller holds locked, written through ``journal``."""
    if job.status == to and allow_same:
        if reason and reason != job.status_reason:
            job.status_reason = reason
            journal.touch(job, "status_reason")
            journal.append(job, EventKind.STATUS, {"status": to, "reason": reason})
        return True
    if to not in TRANSITIONS[job.status]:
        logger.info("job %s: ignoring %s -> %s", job.pk, job.status, to)
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
    if to in (JobStatus.PAUSED, *TERMINAL_STATUSES) and job.admitted_at is not None:
        job.admitted_at = None  # its capacity goes back to admission
        fields.append("admitted_at")
        _admit_soon()
    if failure_class:
        job.failure_class = failure_class
        fields.append("failure_class")
    journal.touch(job, *fields)
    data = {"status": to, "reason": reason}
    if failure_class:
        data["failure_class"] = failure_class
    journal.append(job, EventKind.STATUS, data)
    return True


def job_cancel(*, job: Job) -> Job:
    """Ask for a cancel: ``cancelling`` now, ``cancelled`` once the engine has stopped it."""
    from webapp.jobs.tasks import cancel_job

    if job.is_terminal:
        raise InvalidTransition(f"job is already {job.status}; nothing to cancel")
    with transaction.atomic():
        if job_transition(job_id=job.pk, to=JobStatus.CANCELLING, reason="cancel requested"):
            job_id = str(job.pk)
            transaction.on_commit(lambda: cancel_job.delay(job_id))
    job.refresh_from_db()
    return job


RECLAIM_REASON = "reclaimed"
"""Status reason prefix of a job paused to give borrowed GPUs back: it requeues by itself."""


def job_pause(*, job: Job, reason: str = "pause requested", quiet: bool = False) -> bool:
    """Ask the job to stop at its next checkpoint; a job not yet admitted pauses at once.
    Returns whether anything changed; raises ``InvalidTransition`` (unless ``quiet``) when a
    pause makes no sense in its state."""
    from webapp.jobs.tasks import pause_job

    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status == JobStatus.QUEUED and locked.admitted_at is None:
            return job_transition(job_id=job.pk, to=JobStatus.PAUSED, reason=reason)
        if JobStatus.PAUSING not in TRANSITIONS[locked.status]:
            if quiet:
                return False
            raise InvalidTransition(f"a {locked.status} job cannot be paused")
        job_transition(job_id=job.pk, to=JobStatus.PAUSING, reason=reason)
        job_id = str(job.pk)
        transaction.on_commit(lambda: pause_job.delay(job_id))
        return True


def job_resume(*, job: Job) -> Job:
    """Queue a paused job again; admission gives it capacity and the engine continues it
    after its last checkpoint."""
    if job.status != JobStatus.PAUSED:
        raise InvalidTransition(f"only a paused job can be resumed; this one is {job.status}")
    with transaction.atomic():
        if not job_transition(job_id=job.pk, to=JobStatus.QUEUED, reason="waiting for admission (resumed)"):
            raise InvalidTransition("the job changed state; reload it")
        _admit_soon()
    job.refresh_from_db()
    return job


# -- engine events ----------------------------------------------------------------------------
_ENGINE_TO_JOB = {
    "queued": JobStatus.QUEUED,
    "starting": JobStatus.STARTING,
    "running": JobStatus.RUNNING,
    "paused": JobStatus.PAUSED,
    "succeeded": JobStatus.SUCCEEDED,
    "failed": JobStatus.FAILED,
    "cancelled": JobStatus.CANCELLED,
}


@dataclass
class _EngineBatch:
    """What one batch of engine events writes, gathered in memory and written together by
    ``save``: each job's row is locked and read once, its events, ledger rows, metrics and
    checkpoints inserted in one statement each, its changed fields saved in one UPDATE."""

    engine_id: str
    jobs: dict[str, Job]
    stored_steps: set[tuple[str, int]]
    """(job, step) of the metrics stored, before and in this batch: each step is kept once."""
    journal: JobJournal = field(default_factory=JobJournal)
    bills: list[UsageRecord] = field(default_factory=list)
    metrics: list[JobMetrics] = field(default_factory=list)
    checkpoints: dict[tuple[str, int], JobCheckpoint] = field(default_factory=dict)

    @classmethod
    def load(cls, engine_id: str, events: list[engine_gateway.EngineEvent]) -> _EngineBatch:
        job_ids = {e.pipeline_id for e in events}
        # Locked in one statement, in one order (the spec, which can be large, stays behind).
        locked = Job.objects.select_for_update().filter(pk__in=job_ids).defer("spec").order_by("pk")
        steps = {int(e.data["step"]) for e in events if e.kind is engine_gateway.EventKind.METRICS}
        stored = JobMetrics.objects.filter(job_id__in=job_ids, step__in=steps) if steps else JobMetrics.objects.none()
        return cls(
            engine_id=engine_id,
            jobs={str(job.pk): job for job in locked},
            stored_steps={(str(job_id), step) for job_id, step in stored.values_list("job_id", "step")},
        )

    def bill(self, job: Job, gpu_seconds: float, step: int | None, event: engine_gateway.EngineEvent) -> None:
        if gpu_seconds > 0:
            source = f"{self.engine_id}:{event.seq}"
            self.bills.append(
                UsageRecord(
                    job=job,
                    tenant_id=job.tenant_id,
                    device_type=job.device_type,
                    gpu_seconds=gpu_seconds,
                    step=step,
                    source=source,
                )
            )

    def checkpoint(self, job: Job, step: int) -> None:
        if step > 0:
            self.checkpoints.setdefault((str(job.pk), step), JobCheckpoint(job=job, step=step))

    def save(self) -> None:
        for row in usage_record_many(rows=self.bills):  # the ledger's new rows, in event order
            row.job.gpu_seconds += row.gpu_seconds
            self.journal.touch(row.job, "gpu_seconds")
        JobMetrics.objects.bulk_create(self.metrics)
        JobCheckpoint.objects.bulk_create(self.checkpoints.values(), ignore_conflicts=True)
        self.journal.flush()


def _apply_engine_event(batch: _EngineBatch, event: engine_gateway.EngineEvent) -> None:
    job = batch.jobs.get(event.pipeline_id)
    if job is None:
        return
    if event.kind is engine_gateway.EventKind.STATUS:
        _apply_engine_status(batch, job, event)
    elif event.kind is engine_gateway.EventKind.METRICS:
        _store_metrics(batch, job, event)
    elif event.kind is engine_gateway.EventKind.SAMPLES:
        batch.journal.append(job, EventKind.SAMPLES, dict(event.data))
    elif event.kind is engine_gateway.EventKind.LOG:
        batch.journal.append(job, EventKind.LOG, dict(event.data))


def _apply_engine_status(batch: _EngineBatch, job: Job, event: engine_gateway.EngineEvent) -> None:
    to = _ENGINE_TO_JOB[str(event.data["status"])]
    reason = str(event.data.get("reason", ""))
    if to == JobStatus.QUEUED:
        reason = f"capacity: {reason}"
    failure_class = "system" if to == JobStatus.FAILED else ""
    reclaimed = (
        to == JobStatus.PAUSED and job.status == JobStatus.PAUSING and job.status_reason.startswith(RECLAIM_REASON)
    )
    batch.bill(job, float(event.data.get("device_seconds", 0.0)), None, event)
    _transition(batch.journal, job, to=to, reason=reason, failure_class=failure_class, allow_same=True)
    if to == JobStatus.PAUSED:
        batch.checkpoint(job, int(event.data.get("step", 0)))
    if reclaimed:  # not the user's pause: back in the queue, to continue from the checkpoint
        _transition(
            batch.journal,
            job,
            to=JobStatus.QUEUED,
            reason="waiting for admission (its borrowed GPUs were reclaimed)",
            failure_class="",
            allow_same=False,
        )


def _store_metrics(batch: _EngineBatch, job: Job, event: engine_gateway.EngineEvent) -> None:
    step, values = int(event.data["step"]), dict(event.data["metrics"])
    # Billed per engine event, before the step dedupe: a step redone after a recovery ran
    # (and used GPUs) twice, though its metrics are kept once.
    batch.bill(job, float(values.get("usage/device_seconds", 0.0)), step, event)
    if (str(job.pk), step) in batch.stored_steps:
        return  # already stored: ingestion is at-least-once, storage exactly-once
    batch.stored_steps.add((str(job.pk), step))
    batch.metrics.append(JobMetrics(job=job, step=step, values=values))
    if step > job.current_step:
        job.current_step = step
        batch.journal.touch(job, "current_step")
    save_freq = int(job.resolved_spec.get("trainer", {}).get("save_freq", 0) or 0)
    if step == job.total_steps or (save_freq and step % save_freq == 0):
        batch.checkpoint(job, step)
    batch.journal.append(job, EventKind.METRICS, {"step": step, "total_steps": job.total_steps, "metrics": values})


def engine_events_ingest(*, engine_id: str, events: Iterable[engine_gateway.EngineEvent], next_cursor: int) -> int:
    """Store events past the saved cursor and advance it, atomically; returns how many."""
    with transaction.atomic():
        cursor, _ = EngineCursor.objects.select_for_update().get_or_create(engine_id=engine_id)
        fresh = [e for e in events if e.seq > cursor.cursor]  # the others: another pump stored them first
        if fresh:
            batch = _EngineBatch.load(engine_id, fresh)
            for event in fresh:  # in the engine's order: each job's events keep theirs
                _apply_engine_event(batch, event)
            batch.save()
        if next_cursor > cursor.cursor:
            cursor.cursor = next_cursor
            cursor.save(update_fields=["cursor", "updated_at"])
    return len(fresh)


def engine_events_pump(*, max_batches: int = 20, batch_size: int = 500) -> int:
    """Pull and store everything the engine has produced since the saved cursor."""
    total = 0
    for _ in range(max_batches):
        engine_id = engine_gateway.known_engine_id()
        saved = EngineCursor.objects.filter(engine_id=engine_id).values_list("cursor", flat=True).first() or 0
        pulled_from, events, next_cursor = engine_gateway.pull_events(cursor=saved, limit=batch_size)
        if pulled_from != engine_id:
            continue  # the engine restarted: that cursor was the old engine's; the next round reads the new one's
        if not events:
            break
        total += engine_events_ingest(engine_id=engine_id, events=events, next_cursor=next_cursor)
    return total
