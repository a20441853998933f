"""Sending an endpoint's deliveries: one sender at a time per endpoint (a lease on its row), in
the order they were queued. A delivery that fails holds the endpoint's later ones back and is
tried again after an exponential backoff, until the endpoint answers 2xx or the attempts run
out (``WEBHOOK_MAX_ATTEMPTS``): then it is marked failed and the next one goes."""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db.models import Min, Q
from django.utils import timezone

from webapp.webhooks import sender, signing, task_queue
from webapp.webhooks.addresses import AddressRefused, check_url
from webapp.webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

SENDS_PER_TASK = 20
"""A task sends at most this many, then hands the rest to a fresh task: a slow receiver with a
backlog does not hold a worker process from the other tasks for long."""

ATTEMPTS_LOGGED = 20
"""Attempts kept in a delivery's ``attempt_log``: the first ones and the latest tell the story."""


def backoff_s(attempts: int) -> float:
    """The wait after the ``attempts``-th failed attempt: base, 2 x base, 4 x base, ... capped."""
    return float(min(settings.WEBHOOK_RETRY_BASE_S * 2 ** (attempts - 1), settings.WEBHOOK_RETRY_MAX_S))


def body_of(delivery: WebhookDelivery) -> bytes:
    """The same bytes on every attempt: the stored payload, serialised one fixed way."""
    return json.dumps(delivery.payload, sort_keys=True, separators=(",", ":")).encode()


def _claim(endpoint_id: str) -> bool:
    now = timezone.now()
    lease = timedelta(seconds=settings.WEBHOOK_TIMEOUT_S + 30)
    claimed = (
        WebhookEndpoint.objects.filter(pk=endpoint_id)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=now + lease)
    )
    return claimed == 1


def _release(endpoint_id: str) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(lease_until=None)


def _head(endpoint_id: str) -> WebhookDelivery | None:
    """The endpoint's oldest delivery still to send: nothing after it goes before it."""
    return (
        WebhookDelivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.PENDING)
        .select_related("endpoint")
        .order_by("id")
        .first()
    )


def deliver_due(endpoint_id: str) -> str:
    """Send the endpoint's due deliveries in order; what happened, in a word, for the task's log."""
    outcome = "busy"
    while _claim(endpoint_id):
        try:
            outcome = _send_in_order(endpoint_id)
        finally:
            _release(endpoint_id)
        if outcome == "continued":
            task_queue.deliver(endpoint_id)  # the rest in a fresh task, now that the lease is free
            break
        # A delivery queued while the lease was held woke a task that found the lease taken:
        # look once more now that it is released, or that delivery would wait for the sweep.
        head = _head(endpoint_id)
        if outcome != "sent" or head is None or head.next_attempt_at > timezone.now():
            break
    return outcome


def _send_in_order(endpoint_id: str) -> str:
    for _ in range(SENDS_PER_TASK):
        delivery = _head(endpoint_id)
        if delivery is None:
            return "sent"
        if delivery.next_attempt_at > timezone.now():
            return "waiting"  # its failed attempt scheduled the retry (and the sweep backs that up)
        if not attempt(delivery):
            task_queue.deliver(endpoint_id, countdown_s=backoff_s(delivery.attempts))
            return "retrying"
        _claim_again(endpoint_id)
    return "continued"


def _claim_again(endpoint_id: str) -> None:
    """Extend the lease before the next send: each send may take up to the timeout."""
    lease = timedelta(seconds=settings.WEBHOOK_TIMEOUT_S + 30)
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(lease_until=timezone.now() + lease)


def attempt(delivery: WebhookDelivery) -> bool:
    """One attempt, recorded; True if the delivery is settled (delivered, or given up)."""
    body = body_of(delivery)
    started = time.monotonic()
    status_code: int | None = None
    error = ""
    try:
        target = check_url(delivery.endpoint.url)
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "JigsawRL-Webhooks/1",
            signing.EVENT_ID_HEADER: delivery.event_id,
            signing.DELIVERY_HEADER: str(delivery.pk),
            signing.TIMESTAMP_HEADER: str(timestamp),
            signing.SIGNATURE_HEADER: signing.signature(
                secret=delivery.endpoint.secret, timestamp=timestamp, body=body
            ),
        }
        answer = sender.post(target, body=body, headers=headers, timeout_s=settings.WEBHOOK_TIMEOUT_S)
        status_code = answer.status
        if not 200 <= answer.status < 300:
            error = f"answered {answer.status}: {answer.body[:200]}"
    except AddressRefused as exc:
        error = f"refused: the URL {exc}"
    except OSError as exc:
        error = f"no answer: {exc}"
    _record(delivery, status_code=status_code, error=error, took_ms=round((time.monotonic() - started) * 1000))
    return delivery.status != DeliveryStatus.PENDING


def _record(delivery: WebhookDelivery, *, status_code: int | None, error: str, took_ms: int) -> None:
    now = timezone.now()
    delivery.attempts += 1
    delivery.last_attempt_at = now
    delivery.last_status_code = status_code
    delivery.last_error = error[:500]
    entry = {"at": now.isoformat(), "status_code": status_code, "error": error[:200], "took_ms": took_ms}
    delivery.attempt_log = [*delivery.attempt_log, entry][-ATTEMPTS_LOGGED:]
    if not error:
        delivery.status = DeliveryStatus.DELIVERED
        delivery.delivered_at = now
    elif delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        delivery.status = DeliveryStatus.FAILED
        logger.warning(
            "webhook delivery %s of %s gave up after %d attempts: %s",
            delivery.pk,
            delivery.event_id,
            delivery.attempts,
            error,
        )
    else:
        delivery.next_attempt_at = now + timedelta(seconds=backoff_s(delivery.attempts))
    # An UPDATE, not save(): the endpoint may have been deleted (with this row) meanwhile.
    fields = ("attempts", "last_attempt_at", "last_status_code", "last_error", "attempt_log")
    fields += ("status", "delivered_at", "next_attempt_at")
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**{name: getattr(delivery, name) for name in fields})


def endpoints_due() -> list[str]:
    """Endpoints whose oldest pending delivery is due now (the sweep's list: a wake-up that was
    lost, a retry whose scheduled task went with a restarted worker). Later deliveries wait
    behind their endpoint's oldest, so only the oldest counts."""
    heads = (
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING)
        .order_by()
        .values("endpoint_id")
        .annotate(head=Min("id"))
        .values("head")
    )
    due = WebhookDelivery.objects.filter(pk__in=heads, next_attempt_at__lte=timezone.now())
    return [str(i) for i in due.order_by("id").values_list("endpoint_id", flat=True)]
