"""Registering and removing a tenant's webhook endpoints (audited)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from tenants.models import Tenant
from tenants.services import audit_record
from webapp.webhooks import signing
from webapp.webhooks.addresses import AddressRefused, check_url
from webapp.webhooks.models import WebhookEndpoint


class EndpointRefused(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def endpoint_create(*, tenant: Tenant, url: str, description: str, actor: Any) -> WebhookEndpoint:
    """A new endpoint with a new secret; raises ``EndpointRefused`` naming the field."""
    try:
        check_url(url)
    except AddressRefused as exc:
        raise EndpointRefused("url", str(exc)) from None
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=tenant.pk).first()  # counts below race no other create
        if WebhookEndpoint.objects.filter(tenant=tenant).count() >= settings.WEBHOOK_MAX_ENDPOINTS:
            raise EndpointRefused(
                "url",
                f"this tenant has {settings.WEBHOOK_MAX_ENDPOINTS} endpoints, the most it may have "
                "(delete one first, or send several kinds of events to one receiver)",
            )
        endpoint = WebhookEndpoint.objects.create(
            tenant=tenant,
            url=url,
            description=description,
            secret=signing.new_secret(),
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        audit_record(tenant=tenant, actor=actor, action="webhook.create", target=str(endpoint.pk), data={"url": url})
    return endpoint


def endpoint_delete(*, endpoint: WebhookEndpoint, actor: Any) -> None:
    """Remove it with its deliveries: nothing more is sent to it."""
    with transaction.atomic():
        audit_record(
            tenant=endpoint.tenant,
            actor=actor,
            action="webhook.delete",
            target=str(endpoint.pk),
            data={"url": endpoint.url},
        )
        endpoint.delete()
