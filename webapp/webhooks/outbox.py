"""Job events become webhook deliveries in the transaction that stores them: a delivery exists
exactly when its event committed, once per endpoint (unique event id), in the event's order."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.jobs.models import EventKind, JobEvent
from webapp.webhooks import task_queue
from webapp.webhooks.models import WebhookDelivery, WebhookEndpoint

JOB_STATUS_EVENT = "job.status"


def event_id(event: JobEvent) -> str:
    """The job's id and the event's number in it: what the job's own event list calls it."""
    return f"{event.job_id}:{event.seq}"


def delivery_payload(event: JobEvent, tenant_slug: str) -> dict[str, Any]:
    data = {"job_id": str(event.job_id), "seq": event.seq, **event.data}
    return {
        "id": event_id(event),
        "type": JOB_STATUS_EVENT,
        "created_at": event.created_at.isoformat(),
        "tenant": tenant_slug,
        "data": data,
    }


def enqueue_deliveries(sender: Any, events: list[JobEvent], **_: Any) -> None:
    """``job_events_journaled``'s receiver: queue each status event for every endpoint of its
    tenant, and wake those endpoints' senders once the transaction commits. Costs nothing
    for a batch without status events (metrics, logs), one query for one with them."""
    status_events = [e for e in events if e.kind == EventKind.STATUS]
    if not status_events:
        return
    tenant_ids = {e.job.tenant_id for e in status_events}
    endpoints: dict[int, list[tuple[Any, str]]] = {}
    for endpoint_id, tenant_id, slug in WebhookEndpoint.objects.filter(tenant_id__in=tenant_ids).values_list(
        "id", "tenant_id", "tenant__slug"
    ):
        endpoints.setdefault(tenant_id, []).append((endpoint_id, slug))
    if not endpoints:
        return
    rows = [
        WebhookDelivery(
            endpoint_id=endpoint_id,
            event_id=event_id(event),
            event_type=JOB_STATUS_EVENT,
            payload=delivery_payload(event, slug),
        )
        for event in status_events  # in the journal's order: each job's events by seq
        for endpoint_id, slug in endpoints.get(event.job.tenant_id, [])
    ]
    WebhookDelivery.objects.bulk_create(rows, ignore_conflicts=True)
    woken = sorted({str(row.endpoint_id) for row in rows})
    transaction.on_commit(lambda: [task_queue.deliver(endpoint_id) for endpoint_id in woken])
