"""``POST /api/v1/jobs/estimate``: what a spec would take, cost and meet, without submitting it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.api.inputs import KnownQueryOnly
from webapp.api.tenancy import TenantScoped, resolve_tenant
from webapp.jobs.api.serializers import JobCreateInput
from webapp.jobs.estimate import job_estimate


class EstimateCostOutput(serializers.Serializer):
    amount = serializers.FloatField(help_text="gpu_hours x gpu_hour_price, rounded to cents.")
    currency = serializers.CharField()
    gpu_hour_price = serializers.FloatField()
    price_source = serializers.ChoiceField(
        choices=["tenant", "default"], help_text="The tenant's own price, or the service's GPU_HOUR_PRICE."
    )


class EstimateQueueOutput(serializers.Serializer):
    wait_s = serializers.FloatField(
        allow_null=True, help_text="Engine seconds until admission; null if it would never be admitted."
    )
    jobs_ahead = serializers.IntegerField(help_text="Queued jobs of equal or higher priority, every tenant's.")
    gpus_free = serializers.IntegerField(help_text="GPUs no admitted job holds now.")
    method = serializers.CharField(help_text="How wait_s is computed.")


class EstimateReasonOutput(serializers.Serializer):
    code = serializers.ChoiceField(choices=["quota", "budget"])
    field = serializers.CharField(allow_blank=True, help_text="The spec field to change; empty for a tenant limit.")
    message = serializers.CharField()


class JobEstimateOutput(serializers.Serializer):
    device_type = serializers.CharField()
    num_gpus = serializers.IntegerField()
    steps = serializers.IntegerField(help_text="Steps it would train (total_steps less a clone's start_step).")
    simulated_steps = serializers.IntegerField(help_text="Steps simulated; the rest extrapolated at their pace.")
    step_s = serializers.FloatField(help_text="Engine seconds per step once running.")
    first_step_s = serializers.FloatField(help_text="Engine seconds from admission to the first step's end.")
    total_s = serializers.FloatField(help_text="Engine seconds from admission to the last step's end.")
    gpu_hours = serializers.FloatField(help_text="What the usage ledger would bill (device time by share).")
    tokens_per_step = serializers.FloatField()
    cost = EstimateCostOutput()
    queue = EstimateQueueOutput()
    blocked = serializers.BooleanField(help_text="A quota or budget would refuse it or keep it from finishing.")
    blockers = EstimateReasonOutput(many=True)
    warnings = EstimateReasonOutput(many=True, help_text="What it would meet without being stopped.")


class JobEstimateView(KnownQueryOnly, APIView):
    """The simulator's forecast for a spec on the current cluster; nothing is created. Needs the
    scope a submit needs (``jobs:write``): it is a submit's dry run."""

    permission_classes = [TenantScoped]

    @extend_schema(operation_id="jobs_estimate", request=JobCreateInput, responses=JobEstimateOutput)
    def post(self, request: Request) -> Response:
        tenant, _, _ = resolve_tenant(request)
        body = JobCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(JobEstimateOutput(job_estimate(tenant=tenant, spec=body.validated_data["spec"])).data)
