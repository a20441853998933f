"""Sending the webhooks app's Celery tasks by name (the senders never import ``tasks``)."""

from __future__ import annotations

from webapp.celery_app import app

DELIVER = "webhooks.deliver"
SWEEP = "webhooks.sweep"


def deliver(endpoint_id: str, *, countdown_s: float = 0.0) -> None:
    """Send ``endpoint_id``'s due deliveries, now or after ``countdown_s`` (a retry's backoff).
    In a single-process service (eager tasks) a retry waits for the sweep instead of running
    inline at once."""
    task = app.tasks[DELIVER]
    if countdown_s <= 0:
        task.delay(endpoint_id)
    elif not app.conf.task_always_eager:
        task.apply_async((endpoint_id,), countdown=countdown_s)
