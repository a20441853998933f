from __future__ import annotations

from typing import Any

from rest_framework import serializers

from webapp.api.inputs import KnownFieldsOnly
from webapp.webhooks.models import WebhookDelivery, WebhookEndpoint


class WebhookEndpointOutput(serializers.ModelSerializer[WebhookEndpoint]):
    events = serializers.SerializerMethodField()

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "description", "events", "created_at"]

    def get_events(self, endpoint: WebhookEndpoint) -> list[str]:
        return ["job.status"]


class WebhookEndpointCreated(WebhookEndpointOutput):
    secret = serializers.CharField(help_text="Signs every delivery; shown in this response only.")
    note = serializers.SerializerMethodField()

    class Meta(WebhookEndpointOutput.Meta):
        fields = [*WebhookEndpointOutput.Meta.fields, "secret", "note"]

    def get_note(self, endpoint: Any) -> str:
        return "store this secret now: it is not shown again"


class WebhookEndpointCreateInput(KnownFieldsOnly, serializers.Serializer[Any]):
    url = serializers.URLField(max_length=2000, help_text="https://, resolving to a public address.")
    description = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class WebhookDeliveryOutput(serializers.ModelSerializer[WebhookDelivery]):
    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event_id",
            "event_type",
            "status",
            "attempts",
            "next_attempt_at",
            "last_attempt_at",
            "last_status_code",
            "last_error",
            "attempt_log",
            "created_at",
            "delivered_at",
            "payload",
        ]
