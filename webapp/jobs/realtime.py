"""Pushing job events to WebSocket subscribers through the channel layer (after commit)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def job_group(job_id: Any) -> str:
    return f"job.{job_id}"


def tenant_group(tenant_id: int) -> str:
    return f"tenant.{tenant_id}"


def publish_job_event_on_commit(*, job_id: Any, tenant_id: int, event: dict[str, Any]) -> None:
    """Send after the transaction commits: a subscriber never sees an event that rolled back."""

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        message = {"type": "job.event", "job_id": str(job_id), "event": event}
        try:
            async_to_sync(layer.group_send)(job_group(job_id), message)
            async_to_sync(layer.group_send)(tenant_group(tenant_id), message)
        except Exception:  # a down channel layer must not fail the write; clients replay
            logger.warning("could not publish event of job %s", job_id, exc_info=True)

    transaction.on_commit(send)
