"""The caller's tenant: its quota with what it uses, its usage ledger, its API keys, and the
shared cluster's recent sub-stages."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Q, Sum
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.models import ApiToken, Quota, Scope
from tenants.services import api_key_issue, api_token_revoke, quota_as_dict
from webapp import engine_gateway
from webapp.api.inputs import KnownFieldsOnly, KnownQueryOnly
from webapp.api.schema import results_of
from webapp.api.tenancy import TenantMember, TenantScoped, credential_name, resolve_tenant
from webapp.jobs.admission import holding_jobs
from webapp.jobs.api.serializers import ClusterTimelineOutput
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.usage import month_gpu_hours, month_start, usage_summary


class QuotaView(KnownQueryOnly, APIView):
    permission_classes = [TenantScoped]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        return Response(tenant_quota_report(tenant))


def tenant_quota_report(tenant: Any) -> dict[str, Any]:
    return quota_reports([tenant])[0]


def quota_reports(tenants: list[Any]) -> list[dict[str, Any]]:
    """Each tenant's limits beside what it holds and used, in a fixed number of queries."""
    ids = [t.pk for t in tenants]
    quotas = {q.tenant_id: q for q in Quota.objects.filter(tenant_id__in=ids)}
    device_type, capacity = engine_gateway.cluster_capacity()
    held = {
        r["tenant_id"]: r
        for r in holding_jobs()
        .filter(tenant_id__in=ids)
        .values("tenant_id")
        .annotate(gpus=Sum("num_gpus"), borrowed=Sum("num_gpus", filter=Q(borrowed=True)), jobs=Count("pk"))
    }
    queued = dict(
        Job.objects.filter(tenant_id__in=ids, status=JobStatus.QUEUED, admitted_at__isnull=True)
        .values("tenant_id")
        .annotate(n=Count("pk"))
        .values_list("tenant_id", "n")
    )
    spent = month_gpu_hours(tenant_ids=ids)
    reports = []
    for t in tenants:
        h = held.get(t.pk, {})
        reports.append(
            {
                "tenant": t.slug,
                "device_type": device_type,
                "cluster_gpus": capacity,
                "limits": quota_as_dict(quotas.get(t.pk) or Quota(tenant=t)),
                "usage": {
                    "gpus_held": h.get("gpus") or 0,
                    "borrowed_gpus": h.get("borrowed") or 0,
                    "running_jobs": h.get("jobs", 0),
                    "queued_jobs": queued.get(t.pk, 0),
                    "gpu_hours_this_month": spent.get(t.pk, 0.0),
                },
            }
        )
    return reports


def parse_day(request: Request, name: str, default: datetime) -> datetime:
    raw = request.query_params.get(name)
    if not raw:
        return default
    try:
        return datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise ValidationError({name: [f"must be a date like 2026-11-01, got {raw!r}"]}) from None


class UsageView(KnownQueryOnly, APIView):
    permission_classes = [TenantScoped]

    @extend_schema(
        parameters=[
            OpenApiParameter("since", OpenApiTypes.DATE, description="First day (default: the 1st of this month)."),
            OpenApiParameter("until", OpenApiTypes.DATE, description="Day after the last (default: tomorrow)."),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        now = timezone.now()
        since = parse_day(request, "since", month_start(now))
        until = parse_day(
            request, "until", (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        )
        if until <= since:
            raise ValidationError({"until": ["must be after since"]})
        return Response({"tenant": tenant.slug, **usage_summary(tenant=tenant, since=since, until=until)})


class ApiKeyOutput(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username")
    active = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = [
            "key_id",
            "name",
            "user",
            "scopes",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "active",
        ]

    def get_active(self, token: ApiToken) -> bool:
        return token.is_active()


class ApiKeyCreateInput(KnownFieldsOnly, serializers.Serializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=[s.value for s in Scope]), min_length=1, max_length=3
    )
    expires_in_days = serializers.IntegerField(min_value=1, max_value=365, required=False, default=90)


def _may_manage_all(scopes: list[str]) -> bool:
    """Every key of the tenant, not only the caller's: an owner signed in, staff, or a token
    holding ``admin`` (an owner's narrower token manages only its user's keys)."""
    return Scope.ADMIN.value in scopes


class ApiKeyListView(KnownQueryOnly, APIView):
    """Keys of this tenant: owners see every key, others their own. A new key's secret is in
    the create response only."""

    def get_permissions(self) -> list[Any]:
        # Creating a key judges the caller's scopes itself, to name and audit a refusal.
        return [TenantMember()] if self.request.method == "POST" else [TenantScoped()]

    @extend_schema(operation_id="api_keys_list", responses=results_of("ApiKeyList", ApiKeyOutput(many=True)))
    def get(self, request: Request) -> Response:
        tenant, _, scopes = resolve_tenant(request)
        tokens = ApiToken.objects.filter(tenant=tenant).select_related("user").order_by("-created_at")
        if not _may_manage_all(scopes):
            tokens = tokens.filter(user=request.user)
        return Response({"results": ApiKeyOutput(tokens, many=True).data})

    @extend_schema(request=ApiKeyCreateInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        tenant, _, scopes = resolve_tenant(request)
        body = ApiKeyCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        token, raw = api_key_issue(
            tenant=tenant,
            user=request.user,
            name=body.validated_data["name"],
            scopes=body.validated_data["scopes"],
            expires_at=timezone.now() + timedelta(days=body.validated_data["expires_in_days"]),
            held=scopes,
            credential=credential_name(request),
        )
        return Response(
            {**ApiKeyOutput(token).data, "token": raw, "note": "store this token now: it is not shown again"},
            status=status.HTTP_201_CREATED,
        )


class ApiKeyDetailView(KnownQueryOnly, APIView):
    permission_classes = [TenantScoped]

    @extend_schema(responses={204: None})
    def delete(self, request: Request, key_id: str) -> Response:
        tenant, _, scopes = resolve_tenant(request)
        tokens = ApiToken.objects.filter(tenant=tenant, key_id=key_id)
        if not _may_manage_all(scopes):
            tokens = tokens.filter(user=request.user)
        token = tokens.select_related("tenant").first()
        if token is None:
            raise NotFound()
        api_token_revoke(token=token, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ClusterTimelineView(KnownQueryOnly, APIView):
    """The shared cluster's recent sub-stages, for the cluster page: the caller's own jobs by
    id and name; other tenants' work is shown (the cluster is shared) but not named."""

    permission_classes = [TenantScoped]

    @extend_schema(
        parameters=[
            OpenApiParameter("window_s", OpenApiTypes.NUMBER, description="Engine seconds back (default 600).")
        ],
        responses=ClusterTimelineOutput,
    )
    def get(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        raw = request.query_params.get("window_s", "600")
        try:
            window_s = float(raw)
        except ValueError:
            raise ValidationError({"window_s": [f"must be a number of seconds, got {raw!r}"]}) from None
        if not 1.0 <= window_s <= 86_400.0:
            raise ValidationError({"window_s": [f"must be between 1 and 86400, got {window_s:g}"]})
        timeline = engine_gateway.cluster_timeline(window_s=window_s)
        timeline["engine_mode"] = engine_gateway.engine_mode()
        ids = {s["pipeline_id"] for s in [*timeline["spans"], *timeline["steps"]]}
        own = dict(Job.objects.filter(tenant=tenant, pk__in=_uuids(ids)).values_list("pk", "name"))
        names = {str(pk): name for pk, name in own.items()}
        for item in [*timeline["spans"], *timeline["steps"]]:
            pid = item.pop("pipeline_id")
            item["job"] = pid if pid in names else None
            item["job_name"] = names.get(pid, "another tenant's job")
        return Response(timeline)


def _uuids(values: set[str]) -> list[uuid.UUID]:
    out = []
    for value in values:
        try:
            out.append(uuid.UUID(value))
        except ValueError:
            continue  # not a job id (pipelines started outside the service)
    return out
