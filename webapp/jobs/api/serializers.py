"""Input and output serializers for jobs, kept apart (HackSoft style)."""

from __future__ import annotations

import copy
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webapp import engine_gateway
from webapp.api.inputs import KnownFieldsOnly
from webapp.jobs.models import EngineMode, FailureClass, Job, JobEvent, JobStatus
from webapp.jobs.selectors import queue_position


class JobCreateInput(KnownFieldsOnly, serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    spec = serializers.JSONField(help_text="The pipeline spec (see GET /api/v1/presets for examples).")

    def validate_spec(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value

    def unknown_field(self, name: str) -> str:
        # A spec field sent beside the spec (priority, resources, ...): say where it goes.
        problems = engine_gateway.validate_spec({name: None})
        if not any(p.field == name and p.message.startswith("unknown field") for p in problems):
            return f"unknown field; did you mean {'spec.' + name!r}?"
        return super().unknown_field(name)


class JobPatchInput(KnownFieldsOnly, serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=40), max_length=20, required=False, help_text="Up to 20 labels."
    )
    priority = serializers.FloatField(min_value=0.01, max_value=100.0, required=False)


class JobCloneInput(KnownFieldsOnly, serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    checkpoint_step = serializers.IntegerField(
        min_value=0, required=False, help_text="Start after this checkpoint (default: the latest; 0: from scratch)."
    )
    overrides = serializers.JSONField(required=False, default=dict, help_text="Merged into the source job's spec.")

    def validate_overrides(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


ENGINE_MODE_HELP = (
    "simulated: timings and throughput come from the cost model; no weights, samples or rewards "
    "were produced. real: a model was trained."
)


def engine_mode_field(help_text: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=EngineMode.choices, read_only=True, help_text=f"{help_text} {ENGINE_MODE_HELP}"
    )


class CheckpointOutput(serializers.Serializer):
    step = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    download_url = serializers.SerializerMethodField(
        help_text="Where its model downloads as a Hugging Face directory (a tar); null for a simulated "
        "job, which trains no weights."
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_download_url(self, checkpoint: Any) -> str | None:
        job = self.context.get("job") or checkpoint.job  # the view's job: no query per row
        if job.engine_mode != EngineMode.REAL:
            return None
        return reverse("job-checkpoint-download", kwargs={"pk": str(job.pk), "step": str(checkpoint.step)})


class SampleOutput(serializers.Serializer):
    step = serializers.IntegerField()
    prompt = serializers.CharField()
    completion = serializers.CharField()
    answer = serializers.CharField()
    reward = serializers.FloatField()
    turns = serializers.IntegerField()
    response_tokens = serializers.IntegerField(
        allow_null=True,
        default=None,
        help_text="Tokens the model wrote over all turns (what the batch's response_length/ metrics count); "
        "null in samples stored before it was recorded.",
    )
    reward_error = serializers.CharField(
        default="",
        help_text="Why the job's reward could not score this reply (it raised, ran past its time limit, "
        "returned no number); the reply then scored 0. Empty: it scored.",
    )


class LogLineOutput(serializers.Serializer):
    seq = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    level = serializers.CharField()
    message = serializers.CharField()


class LogsOutput(serializers.Serializer):
    results = LogLineOutput(many=True)
    next_after = serializers.IntegerField(allow_null=True)


class ProgressOutput(serializers.Serializer):
    step = serializers.IntegerField()
    total_steps = serializers.IntegerField()


# A ``ModelSerializer`` mixin: its fields are built from the model once per class rather than
# for every serializer object (DRF introspects the model each time: a third of the cost of
# rendering one job). Each object still gets its own copies, as DRF's declared fields do.
# (A comment, not a docstring: the OpenAPI schema would take it as the description of every
# serializer that uses it.)
class FieldsBuiltOnce:
    _built_fields: dict[str, serializers.Field] | None = None

    def get_fields(self) -> dict[str, serializers.Field]:
        cls = type(self)
        built = cls.__dict__.get("_built_fields")
        if built is None:
            built = super().get_fields()  # type: ignore[misc]
            cls._built_fields = built
        return copy.deepcopy(built)


class JobOutput(FieldsBuiltOnce, serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    # Declared: a read-only model field loses allow_blank, and the schema would refuse "".
    failure_class = serializers.ChoiceField(
        choices=FailureClass.choices, allow_blank=True, read_only=True, help_text="Empty unless the job failed."
    )
    queue_position = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    engine_mode = engine_mode_field("The engine mode it was submitted and run under.")

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "tenant",
            "status",
            "status_reason",
            "failure_class",
            "engine_mode",
            "queue_position",
            "progress",
            "num_gpus",
            "device_type",
            "priority",
            "tags",
            "attempt",
            "borrowed",
            "gpu_seconds",
            "cloned_from",
            "last_event_seq",
            "spec",
            "resolved_spec",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields  # a response: every field is always there (the schema says so)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_position(self, job: Job) -> int | None:
        if job.status != JobStatus.QUEUED:
            return None
        positions = self.context.get("queue_positions")  # a list view computes a page's at once
        return positions[job.pk] if positions and job.pk in positions else queue_position(job=job)

    @extend_schema_field(ProgressOutput)
    def get_progress(self, job: Job) -> dict[str, int]:
        return {"step": job.current_step, "total_steps": job.total_steps}


class JobEventOutput(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["seq", "kind", "created_at", "data"]
        read_only_fields = fields


class MetricsOutput(serializers.Serializer):
    series = serializers.DictField(
        child=serializers.ListField(child=serializers.ListField(child=serializers.FloatField()))
    )


class PresetOutput(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField()
    spec = serializers.JSONField()


class TenantMembershipOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()


class MeOutput(serializers.Serializer):
    username = serializers.CharField()
    is_staff = serializers.BooleanField()
    tenants = TenantMembershipOutput(many=True)


class ClusterSpanOutput(serializers.Serializer):
    job = serializers.CharField(allow_null=True, help_text="The caller's job id; null for another tenant's work.")
    job_name = serializers.CharField()
    kind = serializers.CharField(help_text="Sub-stage kind: prefill, decode, tool, reward, train, weight_sync, ...")
    bucket = serializers.CharField(allow_null=True)
    step = serializers.IntegerField(help_text="1-based step of the job.")
    worker = serializers.IntegerField(allow_null=True, help_text="Rollout worker; null for pipeline-wide work.")
    devices = serializers.ListField(child=serializers.IntegerField())
    start_s = serializers.FloatField(help_text="Engine seconds.")
    end_s = serializers.FloatField(help_text="Engine seconds (now for a running span).")
    share = serializers.FloatField(help_text="Share of each of its devices, 0..1.")
    running = serializers.BooleanField()


class ClusterStepOutput(serializers.Serializer):
    job = serializers.CharField(allow_null=True, help_text="The caller's job id; null for another tenant's work.")
    job_name = serializers.CharField()
    step = serializers.IntegerField(help_text="1-based step of the job.")
    start_s = serializers.FloatField(help_text="Engine seconds: its first sub-stage's start.")
    end_s = serializers.FloatField(help_text="Engine seconds: its weight sync's end.")
    tokens = serializers.IntegerField(help_text="Tokens the step trained on.")
    flops = serializers.FloatField(help_text="Training-equivalent FLOPs: 6 x parameters x tokens.")


class VerlEstimateOutput(serializers.Serializer):
    speedup = serializers.FloatField(
        allow_null=True, help_text="verl_s / actual_s: above 1, the cluster did the work faster than verl would."
    )
    actual_s = serializers.FloatField(help_text="Engine seconds the window's finished steps took (busy periods).")
    verl_s = serializers.FloatField(help_text="The better of the two verl deployments, estimated.")
    verl_dedicated_s = serializers.FloatField(help_text="verl with a partition of its own GPUs per job.")
    verl_serial_s = serializers.FloatField(help_text="verl running the steps one after another on the whole cluster.")
    steps = serializers.IntegerField()
    tokens = serializers.IntegerField()
    note = serializers.CharField(allow_null=True, help_text="Why there is no estimate, when there is none.")


class ClusterLostDeviceOutput(serializers.Serializer):
    device = serializers.IntegerField()
    node = serializers.IntegerField(help_text="The node of the engine's cluster it belongs to.")
    reason = serializers.CharField(help_text="Why it is lost (its Ray node left the cluster).")
    since_s = serializers.FloatField(help_text="Engine seconds: when the engine marked it lost.")


class ClusterTimelineOutput(serializers.Serializer):
    now_s = serializers.FloatField(help_text="The engine's clock.")
    engine_mode = engine_mode_field("The mode of the engine whose cluster this is.")
    since_s = serializers.FloatField()
    device_type = serializers.CharField()
    num_devices = serializers.IntegerField()
    peak_flops = serializers.FloatField(help_text="One device's peak bf16 FLOP/s (for MFU).")
    spans = ClusterSpanOutput(many=True)
    steps = ClusterStepOutput(many=True, help_text="Steps finished in the window, oldest first.")
    verl_estimate = VerlEstimateOutput()
    lost_devices = ClusterLostDeviceOutput(
        many=True, help_text="Devices whose node is gone: nothing runs there until a node joins again."
    )
