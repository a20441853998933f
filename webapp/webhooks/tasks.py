"""Celery tasks of the webhooks app: short, each takes ids only. Broad excepts only here."""

from __future__ import annotations

import logging

from celery import shared_task

from webapp.webhooks import delivery, task_queue

logger = logging.getLogger(__name__)


@shared_task(name=task_queue.DELIVER, acks_late=True, ignore_result=True)
def deliver(endpoint_id: str) -> str:
    """Send one endpoint's due deliveries in order. Safe to run twice at once: the second
    finds the endpoint's lease taken and returns."""
    try:
        return delivery.deliver_due(endpoint_id)
    except Exception:
        logger.exception("webhook deliveries to endpoint %s failed; the sweep tries again", endpoint_id)
        return "failed"


@shared_task(name=task_queue.SWEEP, acks_late=True, ignore_result=True)
def sweep() -> int:
    """Wake every endpoint with a delivery due (beat, every few seconds)."""
    due = delivery.endpoints_due()
    for endpoint_id in due:
        task_queue.deliver(endpoint_id)
    return len(due)
