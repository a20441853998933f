"""Sending the jobs app's Celery tasks, by their registered names: the code that asks for work
(services, admission, the reconciler, views) does not import ``tasks``, which imports it.

A task is looked up in the app's registry and sent with its own ``delay``, not with
``send_task``: its options hold, and with ``task_always_eager`` (standalone mode) it runs in
this process, which ``send_task`` would ignore. Sends from a transaction wait for its commit,
so a task never reads a row that is not there yet (or rolled back)."""

from __future__ import annotations

from django.core.cache import cache
from django.db import transaction

from webapp.celery_app import app

DISPATCH_JOB = "jobs.dispatch_job"
CANCEL_JOB = "jobs.cancel_job"
PAUSE_JOB = "jobs.pause_job"
ADMISSION_TICK = "jobs.admission_tick"
RECONCILE = "jobs.reconcile"
PUMP_ENGINE_EVENTS = "jobs.pump_engine_events"
RETENTION_SWEEP = "jobs.retention_sweep"

ADMIT_SOON_KEY = "jobs:admission-soon"
"""Set for a second by a commit that asked for an admission pass; beat runs one every two."""
PUMP_SOON_KEY = "jobs:pump-soon"
"""Set for a second by a dispatch that asked for a pump; beat pumps every second anyway."""


def send(name: str, *args: str) -> None:
    """Send the task registered as ``name`` now."""
    app.tasks[name].delay(*args)


def send_on_commit(name: str, *args: str) -> None:
    """Send it once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send(name, *args))


def dispatch_job(job_id: str) -> None:
    send_on_commit(DISPATCH_JOB, job_id)


def cancel_job(job_id: str) -> None:
    send_on_commit(CANCEL_JOB, job_id)


def pause_job(job_id: str) -> None:
    send_on_commit(PAUSE_JOB, job_id)


def admission_pass() -> None:
    """One admission pass now (a change outside any transaction may let queued jobs in)."""
    send(ADMISSION_TICK)


def admission_pass_soon() -> None:
    """One admission pass soon after this commits; a burst of commits shares one (a pass
    started before this commit misses it, and beat's next pass, within seconds, takes it)."""

    def send_once() -> None:
        if cache.add(ADMIT_SOON_KEY, 1, timeout=1):
            send(ADMISSION_TICK)

    transaction.on_commit(send_once)


def pump_soon() -> None:
    """An engine-event pump now, shared by a burst of callers."""
    if cache.add(PUMP_SOON_KEY, 1, timeout=1):
        send(PUMP_ENGINE_EVENTS)
