"""Celery tasks: short, idempotent, each takes ids only. Broad excepts only here (the edge).
Nothing imports this module but the app's start-up: work is asked for through ``task_queue``,
by these tasks' names."""

from __future__ import annotations

import logging

from celery import shared_task

from webapp import engine_gateway
from webapp.jobs import admission, task_queue
from webapp.jobs import reconcile as reconcile_module
from webapp.jobs.models import JobStatus
from webapp.jobs.selectors import engine_spec, job_for_dispatch
from webapp.jobs.services import deletion
from webapp.jobs.services.engine_events import engine_events_pump
from webapp.jobs.services.lifecycle import job_transition
from webapp.observability import (
    celery_context,  # noqa: F401  (runs tasks under the request and job ids they were sent with)
    celery_signals,  # noqa: F401  (counts task failures in the worker)
    metrics,
)

logger = logging.getLogger(__name__)


@shared_task(
    name=task_queue.DISPATCH_JOB,
    bind=True,
    acks_late=True,
    autoretry_for=(ConnectionError, TimeoutError),
    retry_backoff=True,
    max_retries=8,
)
def dispatch_job(self, job_id: str) -> str:  # type: ignore[no-untyped-def]
    """Hand an admitted job to the engine. Safe to run twice: the engine ignores a known id
    (and resumes a paused one), and a job that is no longer admitted and queued is skipped."""
    job = job_for_dispatch(job_id)
    if job is None or job.status not in (JobStatus.QUEUED, JobStatus.RECOVERING) or job.admitted_at is None:
        return "skipped"
    try:
        engine_gateway.submit_pipeline(job_id=job_id, spec=engine_spec(job))
    except (ConnectionError, TimeoutError):
        raise
    except Exception as exc:
        code = getattr(exc, "code", "")
        failure = "validation" if code == "validation_error" else "system"
        logger.warning("dispatch of job %s failed: %s", job_id, exc, exc_info=failure == "system")
        job_transition(job_id=job_id, to=JobStatus.FAILED, reason=f"{failure}: {exc}", failure_class=failure)
        return "failed"
    logger.info("job handed to the engine (attempt %d)", job.attempt)
    engine_gateway.failpoint("dispatch.after_submit")  # the engine has it; this task is not acknowledged yet
    task_queue.pump_soon()  # a burst of dispatches shares one early pump
    return "dispatched"


@shared_task(name=task_queue.CANCEL_JOB, acks_late=True)
def cancel_job(job_id: str) -> str:
    known = engine_gateway.cancel_pipeline(job_id=job_id)
    engine_events_pump()  # an end the engine reached first wins over the cancel
    if not known:
        # Never reached the engine (or already ended there): nothing to stop.
        job_transition(job_id=job_id, to=JobStatus.CANCELLED, reason="cancelled before it started")
        return "cancelled"
    return "cancelling"


@shared_task(name=task_queue.PAUSE_JOB, acks_late=True)
def pause_job(job_id: str) -> str:
    known = engine_gateway.pause_pipeline(job_id=job_id)
    engine_events_pump()
    if not known:
        # Admitted but not yet on the engine (dispatch skips a pausing job): nothing runs.
        job_transition(job_id=job_id, to=JobStatus.PAUSED, reason="paused before it started")
        return "paused"
    return "pausing"


@shared_task(name=task_queue.ADMISSION_TICK, acks_late=True, ignore_result=True)
def admission_tick() -> int:
    """One admission pass (beat runs it every few seconds; submits and job ends trigger one).
    Only the holder of the advisory lock admits; a concurrent pass returns at once."""
    try:
        with metrics.ADMISSION_PASS_SECONDS.time():
            admitted = len(admission.admission_tick().admitted)
        metrics.ADMITTED_JOBS.inc(admitted)
        return admitted
    except Exception:
        logger.exception("admission pass failed; the next one retries")
        return 0


@shared_task(name=task_queue.RECONCILE, acks_late=True, ignore_result=True)
def reconcile() -> str:
    """Make the engine and the database agree after crashes (beat, every few seconds)."""
    try:
        return str(reconcile_module.reconcile())
    except (ConnectionError, TimeoutError) as exc:
        logger.warning("reconcile: engine unreachable (%s); next pass retries", exc)
        return "engine unreachable"
    except Exception:
        logger.exception("reconcile pass failed; the next one retries")
        return "failed"


@shared_task(name=task_queue.PUMP_ENGINE_EVENTS, acks_late=True, ignore_result=True)
def pump_engine_events() -> int:
    """Store the engine's new events and push them to subscribers (beat runs it every second)."""
    try:
        with metrics.EVENT_PUMP_PASS_SECONDS.time():
            stored = engine_events_pump()
    except Exception:
        metrics.EVENT_PUMP_FAILURES.inc()
        logger.exception("pumping engine events failed; the next run retries from the saved cursor")
        return 0
    metrics.EVENT_PUMP_EVENTS.inc(stored)
    metrics.EVENT_PUMP_LAST_SUCCESS.set_to_current_time()
    return stored


@shared_task(name=task_queue.RETENTION_SWEEP, acks_late=True, ignore_result=True)
def retention_sweep() -> int:
    """Delete ended jobs older than their tenant's retention (beat, hourly)."""
    try:
        return deletion.retention_sweep()
    except Exception:
        logger.exception("retention pass failed; the next one retries")
        return 0
