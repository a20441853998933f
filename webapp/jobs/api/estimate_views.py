"""``POST /api/v1/jobs/estimate``: what a spec would take, cost and meet, without submitting it;
``GET /api/v1/jobs/<id>/estimate``: an ended job's estimate beside its run."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.api.inputs import KnownQueryOnly
from webapp.api.tenancy import TenantScoped, resolve_tenant
from webapp.jobs import selectors
from webapp.jobs.api.serializers import JobCreateInput
from webapp.jobs.errors import InvalidTransition
from webapp.jobs.estimate.accuracy import job_accuracy
from webapp.jobs.estimate.forecast import job_estimate


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


class EstimateIdleOutput(serializers.Serializer):
    step_s = serializers.FloatField()
    total_s = serializers.FloatField()
    gpu_hours = serializers.FloatField(help_text="Higher than on its own GPUs: it is billed for the GPUs it borrows.")


class EstimateRecordOutput(serializers.Serializer):
    jobs = serializers.IntegerField(help_text="The tenant's recent succeeded jobs compared.")
    step_s_error = serializers.FloatField(help_text="Median of (estimate - actual) / actual of the time per step.")
    gpu_hours_error = serializers.FloatField(allow_null=True, help_text="The same for the GPU-hours billed.")


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
    idle_cluster = EstimateIdleOutput(
        help_text="Alone on an idle cluster, which lends it idle GPUs: the best case. The figures above "
        "are on its own GPUs only (a busy cluster)."
    )
    cost = EstimateCostOutput()
    queue = EstimateQueueOutput()
    blocked = serializers.BooleanField(help_text="A quota or budget would refuse it or keep it from finishing.")
    blockers = EstimateReasonOutput(many=True)
    warnings = EstimateReasonOutput(many=True, help_text="What it would meet without being stopped.")
    record = EstimateRecordOutput(
        allow_null=True, help_text="How far the tenant's recent estimates landed; null before its first run."
    )


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


class AccuracyEstimateOutput(serializers.Serializer):
    step_s = serializers.FloatField()
    gpu_hours = serializers.FloatField()
    idle_cluster_step_s = serializers.FloatField()
    idle_cluster_gpu_hours = serializers.FloatField()


class AccuracyActualOutput(serializers.Serializer):
    step_s = serializers.FloatField(help_text="Median engine seconds per step after the first.")
    gpu_hours = serializers.FloatField(help_text="What the usage ledger billed.")
    steps = serializers.IntegerField(help_text="Steps that reported their time.")
    complete = serializers.BooleanField(help_text="It succeeded: its bill compares with the estimate's.")


class AccuracyErrorOutput(serializers.Serializer):
    step_s = serializers.FloatField(allow_null=True, help_text="(estimate - actual) / actual.")
    idle_cluster_step_s = serializers.FloatField(allow_null=True)
    gpu_hours = serializers.FloatField(allow_null=True, help_text="Null unless the run is complete.")
    idle_cluster_gpu_hours = serializers.FloatField(allow_null=True)


class JobAccuracyOutput(serializers.Serializer):
    estimate = AccuracyEstimateOutput()
    actual = AccuracyActualOutput()
    error = AccuracyErrorOutput()


class JobAccuracyView(KnownQueryOnly, APIView):
    """An ended job's estimate (made again from its spec: the forecast is deterministic) beside
    what its run did; 409 while it runs or when no step finished."""

    permission_classes = [TenantScoped]

    @extend_schema(operation_id="jobs_estimate_accuracy", responses=JobAccuracyOutput)
    def get(self, request: Request, pk: str) -> Response:
        tenant, _, _ = resolve_tenant(request)
        job = selectors.job_get_for_tenant(tenant=tenant, job_id=pk)
        if job is None:
            raise NotFound()
        found = job_accuracy(job=job)
        if found is None:
            raise InvalidTransition(
                f"job {job.name} is {job.status}: an estimate is compared with a run once it has ended "
                "with at least one finished step"
            )
        return Response(JobAccuracyOutput(found).data)
