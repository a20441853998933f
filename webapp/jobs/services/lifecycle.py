"""A job's status changes: admission's writes, the transitions the state machine allows, and
what users ask for (cancel, pause, resume). Every change is a guarded update plus a numbered
job event, in one transaction; the tasks that act on the engine are sent once it commits."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from webapp.jobs import task_queue
from webapp.jobs.errors import InvalidTransition
from webapp.jobs.journal import JobJournal
from webapp.jobs.models import TERMINAL_STATUSES, TRANSITIONS, EventKind, Job, JobStatus

logger = logging.getLogger(__name__)


# -- admission's writes -----------------------------------------------------------------------
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
        task_queue.dispatch_job(str(job.pk))
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
        moved = transition_locked(
            journal, job, to=to, reason=reason, failure_class=failure_class, allow_same=allow_same
        )
        journal.flush()
        return moved


def transition_locked(
    journal: JobJournal, job: Job, *, to: str, reason: str, failure_class: str, allow_same: bool
) -> bool:
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
        task_queue.admission_pass_soon()
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
    if job.is_terminal:
        raise InvalidTransition(f"job is already {job.status}; nothing to cancel")
    with transaction.atomic():
        if job_transition(job_id=job.pk, to=JobStatus.CANCELLING, reason="cancel requested"):
            task_queue.cancel_job(str(job.pk))
    job.refresh_from_db()
    return job


RECLAIM_REASON = "reclaimed"
"""Status reason prefix of a job paused to give borrowed GPUs back: it requeues by itself."""


def job_pause(*, job: Job, reason: str = "pause requested", quiet: bool = False) -> bool:
    """Ask the job to stop at its next checkpoint; a job not yet admitted pauses at once.
    Returns whether anything changed; raises ``InvalidTransition`` (unless ``quiet``) when a
    pause makes no sense in its state."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status == JobStatus.QUEUED and locked.admitted_at is None:
            return job_transition(job_id=job.pk, to=JobStatus.PAUSED, reason=reason)
        if JobStatus.PAUSING not in TRANSITIONS[locked.status]:
            if quiet:
                return False
            raise InvalidTransition(f"a {locked.status} job cannot be paused")
        job_transition(job_id=job.pk, to=JobStatus.PAUSING, reason=reason)
        task_queue.pause_job(str(job.pk))
        return True


def job_resume(*, job: Job) -> Job:
    """Queue a paused job again; admission gives it capacity and the engine continues it
    after its last checkpoint."""
    if job.status != JobStatus.PAUSED:
        raise InvalidTransition(f"only a paused job can be resumed; this one is {job.status}")
    with transaction.atomic():
        if not job_transition(job_id=job.pk, to=JobStatus.QUEUED, reason="waiting for admission (resumed)"):
            raise InvalidTransition("the job changed state; reload it")
        task_queue.admission_pass_soon()
    job.refresh_from_db()
    return job
