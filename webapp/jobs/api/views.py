"""Jobs API views: thin, tenant-scoped, errors in the one shape."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.selectors import tenants_for_user
from webapp import engine_gateway
from webapp.api.errors import error_body
from webapp.api.inputs import KnownQueryOnly, StrictCursorPagination, int_param, refuse_body
from webapp.api.schema import results_of
from webapp.api.tenancy import TenantScoped, resolve_tenant
from webapp.api.throttling import JobCreateRateThrottle
from webapp.jobs import idempotency, selectors
from webapp.jobs.api.renderers import CSVRenderer, metrics_csv
from webapp.jobs.api.serializers import (
    CheckpointOutput,
    JobCloneInput,
    JobCreateInput,
    JobEventOutput,
    JobOutput,
    JobPatchInput,
    LogsOutput,
    MeOutput,
    MetricsOutput,
    PresetOutput,
    SampleOutput,
)
from webapp.jobs.errors import ServiceError
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.services import deletion, lifecycle, submit


class JobCursorPagination(StrictCursorPagination):
    ordering = ("-created_at", "-id")


MAX_POINTS_LIMIT = 10_000


class JobViewSet(KnownQueryOnly, mixins.ListModelMixin, viewsets.GenericViewSet[Job]):
    """Jobs of the caller's tenant; another tenant's job id answers 404."""

    serializer_class = JobOutput
    permission_classes = [TenantScoped]
    pagination_class = JobCursorPagination
    lookup_value_regex = "[0-9a-fA-F-]{32,36}"

    def get_throttles(self) -> list[Any]:
        throttles = super().get_throttles()
        if self.action in ("create", "clone"):
            throttles.append(JobCreateRateThrottle())
        return throttles

    def get_queryset(self) -> Any:
        tenant, _, _ = resolve_tenant(self.request)
        qs = selectors.jobs_for_tenant(tenant=tenant)
        wanted = self.request.query_params.get("status")
        if wanted:
            bad = [s for s in wanted.split(",") if s not in JobStatus.values]
            if bad:
                raise ValidationError({"status": [f"unknown status {bad[0]!r}; one of {', '.join(JobStatus.values)}"]})
            qs = qs.filter(status__in=wanted.split(","))
        tag = self.request.query_params.get("tag")
        if tag:
            qs = qs.filter(tags__contains=[tag])
        name = self.request.query_params.get("name")
        if name:
            qs = qs.filter(name__icontains=name)
        return qs

    def get_object(self) -> Job:
        tenant, _, _ = resolve_tenant(self.request)
        job = selectors.job_get_for_tenant(tenant=tenant, job_id=self.kwargs["pk"])
        if job is None:
            raise NotFound()
        return job

    @extend_schema(
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, description="Comma-separated statuses, e.g. queued,running."),
            OpenApiParameter("tag", OpenApiTypes.STR, description="Only jobs with this tag."),
            OpenApiParameter("name", OpenApiTypes.STR, description="Only jobs whose name contains this."),
        ]
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        assert page is not None  # always paginated
        context = {**self.get_serializer_context(), "queue_positions": selectors.queue_positions(page)}
        return self.get_paginated_response(JobOutput(page, many=True, context=context).data)

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
                job = submit.job_submit(
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

    @extend_schema(request=JobPatchInput, responses=JobOutput)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        body = JobPatchInput(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        job = submit.job_patch(job=self.get_object(), changes=body.validated_data)
        return Response(JobOutput(selectors.job_get_for_tenant(tenant=job.tenant, job_id=job.pk)).data)

    @extend_schema(
        request=None,
        responses={204: None},
        description="Delete an ended job (succeeded, failed or cancelled) with its checkpoints (files "
        "too), samples, logs, events and metrics; its usage stays in the ledger. A job that has not "
        "ended answers 409 (cancel it first); a deleted one answers 404.",
    )
    def destroy(self, request: Request, pk: str | None = None) -> Response:
        refuse_body(request)
        if deletion.job_delete(job=self.get_object(), actor=request.user) is None:
            raise NotFound()
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=JobOutput)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        refuse_body(request)
        job = lifecycle.job_cancel(job=self.get_object())
        return Response(JobOutput(job).data)

    @extend_schema(request=None, responses=JobOutput)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str | None = None) -> Response:
        refuse_body(request)
        job = self.get_object()
        lifecycle.job_pause(job=job)
        job.refresh_from_db()
        return Response(JobOutput(job).data)

    @extend_schema(request=None, responses=JobOutput)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        refuse_body(request)
        job = lifecycle.job_resume(job=self.get_object())
        return Response(JobOutput(job).data)

    @extend_schema(request=JobCloneInput, responses={201: JobOutput})
    @action(detail=True, methods=["post"])
    def clone(self, request: Request, pk: str | None = None) -> Response:
        source = self.get_object()
        body = JobCloneInput(data=request.data)
        body.is_valid(raise_exception=True)
        job = submit.job_clone(
            job=source,
            user=request.user,
            checkpoint_step=body.validated_data.get("checkpoint_step"),
            overrides=body.validated_data["overrides"],
            name=body.validated_data["name"],
        )
        return Response(JobOutput(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("after", OpenApiTypes.INT, description="Only log lines with a larger seq.")],
        responses=LogsOutput,
    )
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        lines = selectors.job_logs_after(job=job, after=int_param(request, "after", 0, minimum=0))
        return Response({"results": lines, "next_after": lines[-1]["seq"] if lines else None})

    @extend_schema(
        parameters=[OpenApiParameter("step", OpenApiTypes.INT, description="Only this step's samples.")],
        responses=SampleOutput(many=True),
    )
    @action(detail=True, methods=["get"])
    def samples(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        step = int_param(request, "step", 0, minimum=1) if "step" in request.query_params else None
        return Response({"results": selectors.job_samples(job=job, step=step)})

    @extend_schema(responses=CheckpointOutput(many=True))
    @action(detail=True, methods=["get"])
    def checkpoints(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        rows = selectors.job_checkpoints(job=job)
        return Response({"results": CheckpointOutput(rows, many=True, context={"job": job}).data})

    @extend_schema(
        parameters=[OpenApiParameter("after", OpenApiTypes.INT, description="Only events with a larger seq.")],
        responses=JobEventOutput(many=True),
    )
    @action(detail=True, methods=["get"])
    def events(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        events = selectors.job_events_after(job=job, after=int_param(request, "after", 0, minimum=0))
        return Response({"results": JobEventOutput(events, many=True).data})

    @extend_schema(
        parameters=[
            OpenApiParameter("max_points", OpenApiTypes.INT, description="Downsample each series to this many."),
            OpenApiParameter("names", OpenApiTypes.STR, description="Comma-separated metric names (default all)."),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"]),
        ],
        responses={200: MetricsOutput, (200, "text/csv"): OpenApiTypes.STR},
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, BrowsableAPIRenderer, CSVRenderer])
    def metrics(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        max_points = None
        if "max_points" in request.query_params:
            max_points = int_param(request, "max_points", 0, minimum=3, maximum=MAX_POINTS_LIMIT)
        names = [n for n in request.query_params.get("names", "").split(",") if n] or None
        series = selectors.job_metric_series(job=job, names=names, max_points=max_points)
        if request.accepted_renderer.format == "csv":
            return Response(
                metrics_csv(series),
                content_type="text/csv",
                headers={"Content-Disposition": f'attachment; filename="{job.pk}-metrics.csv"'},
            )
        return Response({"series": series})


class MeView(KnownQueryOnly, APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=MeOutput)
    def get(self, request: Request) -> Response:
        tenants = [
            {"slug": m.tenant.slug, "name": m.tenant.name, "role": m.role} for m in tenants_for_user(user=request.user)
        ]
        return Response(
            {"username": request.user.get_username(), "is_staff": request.user.is_staff, "tenants": tenants}
        )


class PresetsView(KnownQueryOnly, APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="presets_list", responses=results_of("PresetList", PresetOutput(many=True)))
    def get(self, request: Request) -> Response:
        return Response({"results": engine_gateway.list_presets()})
