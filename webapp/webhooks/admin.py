from django.contrib import admin

from webapp.webhooks.models import WebhookDelivery, WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    """The secret is not shown: it signs deliveries, and the tenant was given it once. The URL
    is not edited here either: only the API checks a new one."""

    list_display = ("url", "tenant", "description", "created_at")
    list_filter = ("tenant",)
    search_fields = ("url", "id")
    exclude = ("secret",)
    readonly_fields = ("id", "tenant", "url", "created_by", "created_at", "lease_until")

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False  # registered through the API, which checks the URL and makes the secret


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    """The delivery log: read here, written only by the senders."""

    list_display = ("created_at", "endpoint", "event_id", "status", "attempts", "last_status_code", "delivered_at")
    list_filter = ("status", "endpoint__tenant")
    search_fields = ("event_id",)

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False
