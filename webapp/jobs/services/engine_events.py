"""Ingesting the engine's events: the event pump pulls them past the saved cursor and stores
each batch in one transaction (status changes, metrics, checkpoints, the usage ledger), so a
pump that dies mid-way stores the batch again or not at all."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction

from webapp import engine_gateway
from webapp.jobs import metric_series
from webapp.jobs.journal import JobJournal
from webapp.jobs.models import EngineCursor, EventKind, Job, JobCheckpoint, JobMetrics, JobStatus, UsageRecord
from webapp.jobs.services.lifecycle import RECLAIM_REASON, transition_locked
from webapp.jobs.usage import usage_record_many
from webapp.observability.logs import log_context

logger = logging.getLogger(__name__)

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
    steps_before: dict[str, int] = field(default_factory=dict)
    """Each job's ``current_step`` when locked: the ranges it moves past are sealed on save."""

    @classmethod
    def load(cls, engine_id: str, events: list[engine_gateway.EngineEvent]) -> _EngineBatch:
        job_ids = {e.pipeline_id for e in events}
        # Locked in one statement, in one order (the spec, which can be large, stays behind).
        locked = Job.objects.select_for_update().filter(pk__in=job_ids).defer("spec").order_by("pk")
        steps = {int(e.data["step"]) for e in events if e.kind is engine_gateway.EventKind.METRICS}
        stored = JobMetrics.objects.filter(job_id__in=job_ids, step__in=steps) if steps else JobMetrics.objects.none()
        jobs = {str(job.pk): job for job in locked}
        return cls(
            engine_id=engine_id,
            jobs=jobs,
            steps_before={job_id: job.current_step for job_id, job in jobs.items()},
            stored_steps={(str(job_id), step) for job_id, step in stored.values_list("job_id", "step")},
        )

    def bill(self, job: Job, gpu_seconds: float, step: int | None, event: engine_gateway.EngineEvent) -> None:
        if gpu_seconds > 0:
            source = f"{self.engine_id}:{event.seq}"
            self.bills.append(
                UsageRecord(
                    job=job,
                    job_uuid=job.pk,
                    job_name=job.name,
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
        self.seal_passed_ranges()
        JobCheckpoint.objects.bulk_create(self.checkpoints.values(), ignore_conflicts=True)
        self.journal.flush()

    def seal_passed_ranges(self) -> None:
        """Columnar chunks of the step ranges a job moved past in this batch, so the metric
        history reads fast from the first fetch (once per ``CHUNK_STEPS`` steps of a job)."""
        for job_id in {str(m.job_id) for m in self.metrics}:
            first = self.steps_before[job_id] // metric_series.CHUNK_STEPS
            last = self.jobs[job_id].current_step // metric_series.CHUNK_STEPS
            if last > first:
                metric_series.seal_chunks(job_id, range(first, last))


def _apply_engine_event(batch: _EngineBatch, event: engine_gateway.EngineEvent) -> None:
    job = batch.jobs.get(event.pipeline_id)
    if job is None:
        return
    if event.kind is engine_gateway.EventKind.STATUS:
        with log_context(job_id=event.pipeline_id):
            logger.info("engine status %s (engine event %d)", event.data["status"], event.seq)
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
    transition_locked(batch.journal, job, to=to, reason=reason, failure_class=failure_class, allow_same=True)
    if to == JobStatus.PAUSED:
        batch.checkpoint(job, int(event.data.get("step", 0)))
    if reclaimed:  # not the user's pause: back in the queue, to continue from the checkpoint
        transition_locked(
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
