"""Tasks are sent by name (``webapp.jobs.task_queue``), so a name that no task is registered
under would only fail when it is sent: each is checked here, and standalone mode's eager run."""

from __future__ import annotations

import pytest
from django.conf import settings

from webapp.celery_app import app
from webapp.jobs import task_queue
from webapp.webhooks import task_queue as webhook_tasks

SENT = (
    task_queue.DISPATCH_JOB,
    task_queue.CANCEL_JOB,
    task_queue.PAUSE_JOB,
    task_queue.ADMISSION_TICK,
    task_queue.RECONCILE,
    task_queue.PUMP_ENGINE_EVENTS,
    task_queue.RETENTION_SWEEP,
    webhook_tasks.SWEEP,
    webhook_tasks.DELIVER,
)


def test_every_name_sent_or_scheduled_is_a_registered_task() -> None:
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert scheduled <= set(SENT)
    missing = [name for name in SENT if name not in app.tasks]
    assert not missing, f"no task registered as {missing}"


def test_in_eager_mode_a_task_sent_by_name_runs_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    task = app.tasks[task_queue.PAUSE_JOB]
    monkeypatch.setattr(task, "run", lambda job_id: ran.append(job_id) or "paused")
    eager, app.conf.task_always_eager = app.conf.task_always_eager, True  # as JIGSAW_STANDALONE sets it
    try:
        task_queue.send(task_queue.PAUSE_JOB, "job-1")
    finally:
        app.conf.task_always_eager = eager
    assert ran == ["job-1"]
