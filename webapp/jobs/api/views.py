"""Jobs API views: thin, tenant-scoped, errors in the one shape."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.selectors import tenants_for_user
from webapp import engine_gateway
from webapp.api_errors import error_body
from webapp.jobs import idempotency, selectors, services
from webapp.jobs.api.serializers import (
    JobCreateInput,
    JobEventOutput,
    JobOutput,
    MeOutput,
    MetricsOutput,
    PresetOutput,
)
from webapp.jobs.errors import ServiceError
from webapp.jobs.models import Job, JobStatus
from webapp.tenancy import TenantScoped, resolve_tenant


class JobCursorPagination(CursorPagination):
    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    ordering = ("-created_at", "-id")


class JobViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[Job]):
    """Jobs of the caller's tenant; another tenant's job id answers 404."""

    serializer_class = JobOutput
    permission_classes = [TenantScoped]
    pagination_class = JobCursorPagination
    lookup_value_regex = "[0-9a-fA-F-]{32,36}"

    def get_queryset(self) -> Any:
        tenant, _, _ = resolve_tenant(self.request)
        qs = selectors.jobs_for_tenant(tenant=tenant)
        wanted = self.request.query_params.get("status")
        if wanted:
            bad = [s for s in wanted.split(",") if s not in JobStatus.values]
            if bad:
                raise ValidationError({"status": [f"unknown status {bad[0]!r}; one of {', '.join(JobStatus.values)}"]})
            qs = qs.filter(status__in=wanted.split(","))
        return qs

    def get_object(self) -> Job:
        tenant, _, _ = resolve_tenant(self.request)
        job = selectors.job_get_for_tenant(tenant=tenant, job_id=self.kwargs["pk"])
        if job is None:
            raise NotFound()
        return job

    @extend_schema(responses=JobOutput)
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        return Response(JobOutput(self.get_object()).data)

    @extend_schema(
        request=JobCreateInput,
        responses={201: JobOutput},
        parameters=[OpenApiParameter("Idempotency-Key", OpenApiTypes.STR, OpenApiParameter.HEADER, required=True)],
    )
    def create(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        key = request.headers.get("Idempotency-Key", "").strip()
        if not key or len(key) > 200:
            return Response(
                error_body(
                    "idempotency_key_required",
                    "send an Idempotency-Key header (a fresh random UUID per new job) "
                    "so that retries never create a job twice",
                    [{"field": "Idempotency-Key", "message": "is required, at most 200 characters"}],
                ),
                status=status.HTTP_400_BAD_REQUEST,
            )
        body = JobCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        fingerprint = idempotency.request_fingerprint(request.data)
        stored = idempotency.idempotency_claim(tenant=tenant, key=key, fingerprint=fingerprint)
        if stored is not None:
            return Response(stored.body, status=stored.status, headers={"Idempotent-Replayed": "true"})
        try:
            with transaction.atomic():
                job = services.job_submit(
                    tenant=tenant, user=request.user, name=body.validated_data["name"], spec=body.validated_data["spec"]
                )
                payload = JobOutput(job).data
                idempotency.idempotency_store(tenant=tenant, key=key, status=201, body=payload)
        except ServiceError as exc:
            payload = error_body(exc.code, exc.message, exc.details)
            idempotency.idempotency_store(tenant=tenant, key=key, status=exc.http_status, body=payload)
            return Response(payload, status=exc.http_status)
        except Exception:
            idempotency.idempotency_release(tenant=tenant, key=key)
            raise
        return Response(payload, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=JobOutput)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        job = services.job_cancel(job=self.get_object())
        return Response(JobOutput(job).data)

    @extend_schema(
        parameters=[OpenApiParameter("after", OpenApiTypes.INT, description="Only events with a larger seq.")],
        responses=JobEventOutput(many=True),
    )
    @action(detail=True, methods=["get"])
    def events(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        try:
            after = int(request.query_params.get("after", "0"))
        except ValueError:
            raise ValidationError({"after": ["must be an integer"]}) from None
        events = selectors.job_events_after(job=job, after=after)
        return Response({"results": JobEventOutput(events, many=True).data})

    @extend_schema(responses=MetricsOutput)
    @action(detail=True, methods=["get"])
    def metrics(self, request: Request, pk: str | None = None) -> Response:
        return Response({"series": selectors.job_metric_series(job=self.get_object())})


class MeView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=MeOutput)
    def get(self, request: Request) -> Response:
        tenants = [
            {"slug": m.tenant.slug, "name": m.tenant.name, "role": m.role} for m in tenants_for_user(user=request.user)
        ]
        return Response(
            {"username": request.user.get_username(), "is_staff": request.user.is_staff, "tenants": tenants}
        )


class PresetsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=PresetOutput(many=True))
    def get(self, request: Request) -> Response:
        return Response({"results": engine_gateway.list_presets()})
