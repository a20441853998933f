"""A tenant's webhook endpoints and the deliveries of job events to them (the outbox and its log)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenants.models import Tenant


class WebhookEndpoint(models.Model):
    """An HTTPS URL that receives the tenant's job events, signed with ``secret``.

    The secret is kept as is (not hashed): each delivery is signed with it. The API shows it
    in the create response only."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True, default="")
    secret = models.CharField(max_length=100)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="A delivery task is sending to it until then: one sender at a time, in order."
    )

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["tenant", "created_at"])]

    def __str__(self) -> str:
        return f"{self.url} ({self.tenant})"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    """Gave up after the last attempt; the endpoint's next delivery goes on."""


class WebhookDelivery(models.Model):
    """One event for one endpoint: sent until the endpoint answers 2xx or the attempts run out.

    ``event_id`` is unique per endpoint, so an event is never queued twice for it; every
    attempt sends the same body with the same event id."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=100)
    event_type = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    attempt_log = models.JSONField(default=list, blank=True, help_text="The latest attempts, oldest first.")
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["endpoint", "id"]
        constraints = [models.UniqueConstraint(fields=["endpoint", "event_id"], name="webhook_delivery_event_unique")]
        indexes = [
            # The sender's question: this endpoint's oldest delivery still to send.
            models.Index(fields=["endpoint", "id"], condition=models.Q(status="pending"), name="webhook_pending_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} -> {self.endpoint_id} ({self.status})"
