from django.urls import re_path

from webapp.webhooks.api import views

_ID = r"(?P<endpoint_id>[0-9a-fA-F-]{32,36})"

urlpatterns = [
    re_path(r"^webhooks/?$", views.WebhookListView.as_view(), name="webhooks"),
    re_path(rf"^webhooks/{_ID}/?$", views.WebhookDetailView.as_view(), name="webhook"),
    re_path(rf"^webhooks/{_ID}/deliveries/?$", views.WebhookDeliveriesView.as_view(), name="webhook-deliveries"),
]
