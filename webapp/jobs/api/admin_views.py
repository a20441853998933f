"""Cluster administration: every tenant's quota against its usage, quota edits (audited), the
global queue with reasons, the cluster, the audit log. Staff only; a token also needs the
``admin`` scope."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Sum
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.models import ApiToken, AuditLog, BudgetAction, Role, Tenant
from tenants.services import membership_add, membership_remove, quota_update, tenant_create
from webapp import engine_gateway
from webapp.api.inputs import KnownFieldsOnly, KnownQueryOnly, StrictCursorPagination
from webapp.api.schema import results_of
from webapp.jobs import task_queue
from webapp.jobs.admission import capacity_summary, queue_summary
from webapp.jobs.api.account_views import parse_day, quota_reports, tenant_quota_report
from webapp.jobs.models import UsageRecord
from webapp.jobs.usage import month_start


class IsClusterAdmin(permissions.BasePermission):
    message = "cluster administration needs a staff account (and a token with the admin scope)"

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_staff):
            return False
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return token is None or "admin" in token.scopes


class QuotaInput(KnownFieldsOnly, serializers.Serializer):
    guaranteed_gpus = serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=100_000), required=False
    )
    borrow_limit_gpus = serializers.IntegerField(min_value=0, max_value=100_000, required=False)
    max_running_jobs = serializers.IntegerField(min_value=0, max_value=10_000, required=False)
    max_queued_jobs = serializers.IntegerField(min_value=0, max_value=100_000, required=False)
    max_gpus_per_job = serializers.IntegerField(min_value=1, max_value=100_000, required=False)
    monthly_gpu_hours = serializers.FloatField(min_value=0, max_value=1e9, required=False)
    budget_action = serializers.ChoiceField(choices=BudgetAction.values, required=False)
    priority_limit = serializers.FloatField(min_value=0.01, max_value=100.0, required=False)
    fair_share_weight = serializers.FloatField(min_value=0.01, max_value=1000.0, required=False)

    def validate_guaranteed_gpus(self, value: dict[str, int]) -> dict[str, int]:
        device_type, capacity = engine_gateway.cluster_capacity()
        too_many = {k: v for k, v in value.items() if k == device_type and v > capacity}
        if too_many:
            raise serializers.ValidationError(
                {k: [f"must be <= the cluster's {capacity} {k} GPUs, got {v}"] for k, v in too_many.items()}
            )
        return value


class TenantCreateInput(KnownFieldsOnly, serializers.Serializer):
    slug = serializers.SlugField(max_length=63)
    name = serializers.CharField(max_length=200)
    quota = QuotaInput(required=False)

    def validate_slug(self, value: str) -> str:
        if Tenant.objects.filter(slug=value).exists():
            raise serializers.ValidationError(f"a tenant {value!r} already exists")
        return value


class AdminTenantsView(KnownQueryOnly, APIView):
    permission_classes = [IsClusterAdmin]

    @extend_schema(request=TenantCreateInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        body = TenantCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = tenant_create(
            slug=data["slug"], name=data["name"], actor=request.user, quota=dict(data.get("quota", {}))
        )
        return Response({"name": tenant.name, **tenant_quota_report(tenant)}, status=201)

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        tenants = list(Tenant.objects.order_by("slug"))
        reports = quota_reports(tenants)
        return Response({"results": [{"name": t.name, **r} for t, r in zip(tenants, reports, strict=True)]})


class AdminQuotaView(KnownQueryOnly, APIView):
    permission_classes = [IsClusterAdmin]

    def _tenant(self, slug: str) -> Tenant:
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise NotFound()
        return tenant

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, slug: str) -> Response:
        return Response(tenant_quota_report(self._tenant(slug)))

    @extend_schema(request=QuotaInput, responses=OpenApiTypes.OBJECT)
    def patch(self, request: Request, slug: str) -> Response:
        tenant = self._tenant(slug)
        body = QuotaInput(data=request.data)
        body.is_valid(raise_exception=True)
        quota_update(tenant=tenant, changes=dict(body.validated_data), actor=request.user)
        task_queue.admission_pass()  # a larger quota may let queued jobs in now
        return Response(tenant_quota_report(tenant))


class MemberInput(KnownFieldsOnly, serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.values)


class AdminMemberView(KnownQueryOnly, APIView):
    """Put a user in a tenant with a role, or take them out (their tokens for it are revoked)."""

    permission_classes = [IsClusterAdmin]

    def _target(self, slug: str, username: str) -> tuple[Tenant, Any]:
        tenant = Tenant.objects.filter(slug=slug).first()
        user = get_user_model().objects.filter(username=username).first()
        if tenant is None or user is None:
            raise NotFound()
        return tenant, user

    @extend_schema(request=MemberInput, responses=OpenApiTypes.OBJECT)
    def put(self, request: Request, slug: str, username: str) -> Response:
        tenant, user = self._target(slug, username)
        body = MemberInput(data=request.data)
        body.is_valid(raise_exception=True)
        membership_add(tenant=tenant, user=user, role=body.validated_data["role"], actor=request.user)
        return Response({"tenant": slug, "user": username, "role": body.validated_data["role"]})

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str, username: str) -> Response:
        tenant, user = self._target(slug, username)
        if not membership_remove(tenant=tenant, user=user, actor=request.user):
            raise NotFound()
        return Response(status=204)


class AdminUsageView(KnownQueryOnly, APIView):
    permission_classes = [IsClusterAdmin]

    @extend_schema(
        parameters=[
            OpenApiParameter("since", OpenApiTypes.DATE, description="From this day (default: this month's 1st)."),
            OpenApiParameter("until", OpenApiTypes.DATE, description="Up to this day, excluded (default: a day on)."),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        now = timezone.now()
        since = parse_day(request, "since", month_start(now))
        until = parse_day(request, "until", now + timedelta(days=1))
        if until <= since:
            raise ValidationError({"until": ["must be after since"]})
        rows = (
            UsageRecord.objects.filter(created_at__gte=since, created_at__lt=until)
            .values("tenant__slug", "device_type")
            .annotate(s=Sum("gpu_seconds"))
            .order_by("tenant__slug", "device_type")
        )
        by_tenant: dict[str, dict[str, float]] = {}
        for r in rows:
            by_tenant.setdefault(r["tenant__slug"], {})[r["device_type"]] = r["s"] / 3600.0
        return Response({"since": since.isoformat(), "until": until.isoformat(), "gpu_hours_by_tenant": by_tenant})


class AdminQueueView(KnownQueryOnly, APIView):
    permission_classes = [IsClusterAdmin]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response({"results": queue_summary()})


class AdminClusterView(KnownQueryOnly, APIView):
    permission_classes = [IsClusterAdmin]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        try:
            engine = engine_gateway.describe_engine()
        except (ConnectionError, TimeoutError) as exc:
            engine = {"error": f"engine unreachable: {exc}"}
        return Response({**capacity_summary(), "engine": engine})


class AuditOutput(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    actor = serializers.CharField(source="actor.username", default=None, allow_null=True)  # None: the system

    class Meta:
        model = AuditLog
        fields = ["id", "created_at", "tenant", "actor", "action", "target", "data"]


class AuditPagination(StrictCursorPagination):
    ordering = ("-created_at", "-id")


class AdminAuditView(KnownQueryOnly, APIView):
    permission_classes = [IsClusterAdmin]

    @extend_schema(
        operation_id="admin_audit_list",
        parameters=[
            OpenApiParameter("tenant", OpenApiTypes.STR, description="Only this tenant's entries (its slug)."),
            OpenApiParameter("cursor", OpenApiTypes.STR, description="A next or previous link's cursor."),
            OpenApiParameter("page_size", OpenApiTypes.INT, description="Entries a page (default 50, at most 200)."),
        ],
        responses=results_of("AuditPage", AuditOutput(many=True), paged=True),
    )
    def get(self, request: Request) -> Response:
        rows = AuditLog.objects.select_related("tenant", "actor")
        slug = request.query_params.get("tenant")
        if slug:
            tenant = Tenant.objects.filter(slug=slug).first()
            if tenant is None:  # a misspelt slug would otherwise look like a tenant with no history
                raise ValidationError({"tenant": [f"no tenant {slug!r}"]})
            rows = rows.filter(tenant=tenant)
        paginator = AuditPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(AuditOutput(page, many=True).data)
