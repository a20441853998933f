"""Webhooks API: register, list and delete a tenant's endpoints; read an endpoint's deliveries.

Every call needs the ``admin`` scope (a tenant's owners, staff, or a token holding ``admin``):
an endpoint sends the tenant's job events to a place outside the service, the same trust as
issuing API keys. Another tenant's endpoint answers 404."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.models import Scope
from webapp.api.inputs import KnownQueryOnly, StrictCursorPagination
from webapp.api.schema import results_of
from webapp.api.tenancy import resolve_tenant
from webapp.webhooks import services
from webapp.webhooks.api.serializers import (
    WebhookDeliveryOutput,
    WebhookEndpointCreated,
    WebhookEndpointCreateInput,
    WebhookEndpointOutput,
)
from webapp.webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint


class TenantAdmin(permissions.BasePermission):
    """Resolved to a tenant and holding ``admin`` there."""

    message = "webhooks need the admin scope (a tenant owner, or a token with the admin scope)"

    def has_permission(self, request: Any, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        _, _, scopes = resolve_tenant(request)
        return Scope.ADMIN.value in scopes


def _endpoint_or_404(request: Request, endpoint_id: str) -> WebhookEndpoint:
    tenant, _, _ = resolve_tenant(request)
    try:
        pk = uuid.UUID(endpoint_id)
    except ValueError:
        raise NotFound() from None
    endpoint = WebhookEndpoint.objects.filter(tenant=tenant, pk=pk).select_related("tenant").first()
    if endpoint is None:
        raise NotFound()
    return endpoint


class WebhookListView(KnownQueryOnly, APIView):
    """The tenant's endpoints; POST registers one and answers its secret, once."""

    permission_classes = [TenantAdmin]

    @extend_schema(operation_id="webhooks_list", responses=results_of("WebhookList", WebhookEndpointOutput(many=True)))
    def get(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        endpoints = WebhookEndpoint.objects.filter(tenant=tenant)
        return Response({"results": WebhookEndpointOutput(endpoints, many=True).data})

    @extend_schema(request=WebhookEndpointCreateInput, responses={201: WebhookEndpointCreated})
    def post(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        body = WebhookEndpointCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            endpoint = services.endpoint_create(
                tenant=tenant,
                url=body.validated_data["url"],
                description=body.validated_data["description"],
                actor=request.user,
            )
        except services.EndpointRefused as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response(WebhookEndpointCreated(endpoint).data, status=status.HTTP_201_CREATED)


class WebhookDetailView(KnownQueryOnly, APIView):
    permission_classes = [TenantAdmin]

    @extend_schema(responses=WebhookEndpointOutput)
    def get(self, request: Request, endpoint_id: str) -> Response:
        return Response(WebhookEndpointOutput(_endpoint_or_404(request, endpoint_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, endpoint_id: str) -> Response:
        services.endpoint_delete(endpoint=_endpoint_or_404(request, endpoint_id), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryCursorPagination(StrictCursorPagination):
    ordering = ("-id",)


class WebhookDeliveriesView(KnownQueryOnly, GenericAPIView[WebhookDelivery]):
    """An endpoint's deliveries, newest first: each attempt's answer or error."""

    permission_classes = [TenantAdmin]
    pagination_class = DeliveryCursorPagination
    serializer_class = WebhookDeliveryOutput

    @extend_schema(
        operation_id="webhooks_deliveries_list",
        parameters=[
            OpenApiParameter(
                "status", OpenApiTypes.STR, description="Only deliveries in this status: pending, delivered, failed."
            )
        ],
        responses=WebhookDeliveryOutput(many=True),
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        endpoint = _endpoint_or_404(request, endpoint_id)
        deliveries = WebhookDelivery.objects.filter(endpoint=endpoint)
        wanted = request.query_params.get("status")
        if wanted:
            if wanted not in DeliveryStatus.values:
                raise ValidationError(
                    {"status": [f"unknown status {wanted!r}; one of {', '.join(DeliveryStatus.values)}"]}
                )
            deliveries = deliveries.filter(status=wanted)
        page = self.paginate_queryset(deliveries)
        assert page is not None  # always paginated
        return self.get_paginated_response(WebhookDeliveryOutput(page, many=True).data)
