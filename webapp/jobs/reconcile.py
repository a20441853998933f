"""The reconciler: Postgres is the source of truth, and after any crash (a lost Celery task,
a restarted engine, a dropped event) this pass makes the engine and the database agree.

Run on beat under its own advisory lock (one leader). For every job that holds capacity it
compares the database's status with the engine's:

- unknown to the engine, admitted more than ``DISPATCH_GRACE_S`` ago: the dispatch was lost
  (queued) or the engine restarted (running): re-dispatch, from the latest checkpoint, with
  the job ``recovering`` if it had started;
- unknown to the engine while cancelling or pausing: nothing runs, so it is cancelled or paused;
- cancelling or pausing while the engine still runs it: the request is sent again.

And the other way: a pipeline the engine runs for a job the database holds as ended, paused
or unknown is cancelled there (it would use capacity nobody accounts for). One the database
holds as waiting for admission (or, once the pump replayed the engine's events, as running
without an admission) is adopted instead: admitted as it is. Only a database that went back in
time does that, restored from a dump taken before the admission; cancelling would end a job
nobody cancelled, and sending it again would run it twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from webapp import engine_gateway
from webapp.jobs import task_queue
from webapp.jobs.admission import HOLDING_STATUSES, holding_jobs
from webapp.jobs.journal import JobJournal
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.selectors import latest_checkpoint_step
from webapp.jobs.services.engine_events import engine_events_pump
from webapp.jobs.services.lifecycle import job_transition, transition_locked

logger = logging.getLogger(__name__)

RECONCILE_LOCK_KEY = 0x4A5247_02
DISPATCH_GRACE_S = 30.0
"""How long an admitted job may take to appear on the engine before its dispatch counts as lost
(``RECONCILE_DISPATCH_GRACE_S`` in settings overrides it)."""

_ENGINE_RUNNING = {"queued", "starting", "running"}
_ADOPTABLE = (JobStatus.QUEUED, JobStatus.STARTING, JobStatus.RUNNING, JobStatus.RECOVERING)
ADOPTED_REASON = "admitted: the engine runs it, and the database had not recorded its admission"


@dataclass
class ReconcileResult:
    leader: bool = True
    redispatched: list[str] = field(default_factory=list)
    settled: dict[str, str] = field(default_factory=dict)
    """Job id -> the status it was moved to because the engine no longer has it."""
    resent: list[str] = field(default_factory=list)
    orphans_cancelled: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    """Jobs the engine runs that the database held as not admitted (restored from a dump)."""


def _try_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [RECONCILE_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def reconcile() -> ReconcileResult:
    engine_events_pump()  # first take in whatever the engine already said
    result = ReconcileResult()
    with transaction.atomic():
        if not _try_lock():
            return ReconcileResult(leader=False)
        states = engine_gateway.pipeline_states()
        grace = timezone.now() - timedelta(seconds=getattr(settings, "RECONCILE_DISPATCH_GRACE_S", DISPATCH_GRACE_S))
        for job in holding_jobs().select_for_update(skip_locked=True):
            job_id, engine_state = str(job.pk), states.get(str(job.pk))
            if engine_state is None:
                if job.status == JobStatus.CANCELLING:
                    job_transition(job_id=job_id, to=JobStatus.CANCELLED, reason="cancelled (not running)")
                    result.settled[job_id] = JobStatus.CANCELLED
                elif job.status == JobStatus.PAUSING:
                    job_transition(job_id=job_id, to=JobStatus.PAUSED, reason="paused (not running)")
                    result.settled[job_id] = JobStatus.PAUSED
                elif job.admitted_at is not None and job.admitted_at < grace:
                    _redispatch(job)
                    task_queue.dispatch_job(job_id)
                    result.redispatched.append(job_id)
            elif engine_state in _ENGINE_RUNNING and job.status == JobStatus.CANCELLING:
                task_queue.cancel_job(job_id)
                result.resent.append(job_id)
            elif engine_state in _ENGINE_RUNNING and job.status == JobStatus.PAUSING:
                task_queue.pause_job(job_id)
                result.resent.append(job_id)
        holding = {str(pk) for pk in holding_jobs().values_list("pk", flat=True)}
        for job_id, engine_state in states.items():
            if engine_state in _ENGINE_RUNNING and job_id not in holding:
                _unaccounted(job_id, result)
    if result.redispatched or result.settled or result.orphans_cancelled or result.adopted:
        logger.warning("reconciled: %s", result)
    return result


def _unaccounted(job_id: str, result: ReconcileResult) -> None:
    """A pipeline the engine runs for no job that holds capacity: adopt it or cancel it."""
    job = Job.objects.select_for_update(skip_locked=True).defer("spec").filter(pk=job_id).first()
    if job is None and Job.objects.filter(pk=job_id).exists():
        return  # another transaction holds the row (the pump applying its events): the next pass decides
    if job is not None and job.admitted_at is not None and job.status in HOLDING_STATUSES:
        return  # admitted since the list of holding jobs was read
    if job is not None and job.admitted_at is None and job.status in _ADOPTABLE:
        job.admitted_at = timezone.now()
        job.attempt += 1  # the admission the database lost
        journal = JobJournal()
        journal.touch(job, "admitted_at", "attempt")
        transition_locked(journal, job, to=job.status, reason=ADOPTED_REASON, failure_class="", allow_same=True)
        journal.flush()
        result.adopted.append(job_id)
        return
    engine_gateway.cancel_pipeline(job_id=job_id)
    result.orphans_cancelled.append(job_id)


def _redispatch(job: Job) -> None:
    """Mark a job the engine lost; the dispatch (after commit) starts it from its checkpoint.
    A dispatch that never reached the engine is sent again as the same attempt: nothing ran."""
    started = job.status in (JobStatus.STARTING, JobStatus.RUNNING)
    if started:
        job_transition(
            job_id=job.pk,
            to=JobStatus.RECOVERING,
            reason=f"the engine lost it; resuming after step {latest_checkpoint_step(job)}",
        )
        job.attempt += 1
    job.admitted_at = timezone.now()
    Job.objects.filter(pk=job.pk).update(admitted_at=job.admitted_at, attempt=job.attempt)
