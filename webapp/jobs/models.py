"""Jobs, their events and metrics, idempotency records and the engine event cursor."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenants.models import Tenant


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    RECOVERING = "recovering"
    PAUSING = "pausing"
    PAUSED = "paused"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})

# Allowed transitions; terminal states have none (they are absorbing).
TRANSITIONS: dict[str, frozenset[str]] = {
    JobStatus.QUEUED: frozenset({"starting", "running", "pausing", "paused", "cancelling", "cancelled", "failed"}),
    # "recovering": the engine lost it while placing it (restarted mid-start); it is sent again.
    JobStatus.STARTING: frozenset(
        {"queued", "running", "recovering", "pausing", "cancelling", "cancelled", "failed", "succeeded"}
    ),
    JobStatus.RUNNING: frozenset({"recovering", "pausing", "cancelling", "cancelled", "failed", "succeeded"}),
    JobStatus.RECOVERING: frozenset({"running", "pausing", "cancelling", "cancelled", "failed"}),
    JobStatus.PAUSING: frozenset({"paused", "cancelling", "cancelled", "failed", "succeeded"}),
    JobStatus.PAUSED: frozenset({"queued", "cancelling", "cancelled"}),
    JobStatus.CANCELLING: frozenset({"cancelled", "failed", "succeeded"}),
    JobStatus.SUCCEEDED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}


class FailureClass(models.TextChoices):
    VALIDATION = "validation"
    USER_CODE = "user_code"
    OUT_OF_MEMORY = "out_of_memory"
    SYSTEM = "system"
    CAPACITY = "capacity"
    QUOTA = "quota"
    TIMEOUT = "timeout"


class EngineMode(models.TextChoices):
    SIMULATED = "simulated"
    """Timings and throughput come from the cost model; no model is trained."""
    REAL = "real"
    """Models are trained for real (tiny ones on this machine's cores, or on GPUs)."""


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    name = models.CharField(max_length=120)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    status_reason = models.CharField(max_length=300, blank=True, default="")
    failure_class = models.CharField(max_length=16, choices=FailureClass.choices, blank=True, default="")
    spec = models.JSONField(help_text="The spec as the user submitted it.")
    resolved_spec = models.JSONField(help_text="The spec with every default filled in.")
    num_gpus = models.PositiveIntegerField()
    device_type = models.CharField(max_length=32, default="", blank=True)
    priority = models.FloatField(default=1.0, help_text="Higher is admitted first (capped by the tenant's quota).")
    tags = models.JSONField(default=list, blank=True)
    engine_mode = models.CharField(
        max_length=16,
        choices=EngineMode.choices,
        default=EngineMode.SIMULATED,
        help_text="The engine mode it was submitted under (the service's ENGINE_MODE then).",
    )
    admitted_at = models.DateTimeField(
        null=True, blank=True, help_text="When admission gave it capacity; cleared when it pauses."
    )
    attempt = models.PositiveIntegerField(default=0, help_text="How many times it was handed to the engine.")
    borrowed = models.BooleanField(default=False, help_text="Admitted on capacity beyond its tenant's guarantee.")
    gpu_seconds = models.FloatField(default=0.0, help_text="Sum of its usage ledger rows.")
    cloned_from = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="clones")
    start_step = models.PositiveIntegerField(default=0, help_text="Steps already done when it started (clones).")
    total_steps = models.PositiveIntegerField()
    current_step = models.PositiveIntegerField(default=0)
    last_event_seq = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "status"]),
            models.Index(fields=["status", "created_at"]),
            # Queue positions count the queued jobs ahead: a small index of only those.
            models.Index(fields=["created_at"], condition=models.Q(status="queued"), name="job_queued_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class UsageRecord(models.Model):
    """The usage ledger: GPU-seconds a job used on one device type, as the engine measured
    it (co-located pipelines split a device by their shares). Append-only.

    A row outlives its job: deleting a job clears ``job`` and keeps the job's id and name
    here, so what a tenant used (and was billed) never changes after the fact."""

    job = models.ForeignKey(Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="usage")
    job_uuid = models.UUIDField(help_text="The job's id, kept when the job is deleted.")
    job_name = models.CharField(max_length=120, default="", help_text="The job's name when it was billed.")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="usage")
    device_type = models.CharField(max_length=32)
    gpu_seconds = models.FloatField()
    step = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(
        max_length=100, unique=True, help_text="The engine event it came from (engine id:seq): billed once."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["tenant", "created_at"])]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.job is not None and self.job_uuid is None:
            self.job_uuid, self.job_name = self.job.pk, self.job.name
        super().save(*args, **kwargs)


class TenantShare(models.Model):
    """Fair-share state of a tenant: GPU-seconds decayed with a half-life, so old usage fades."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="share")
    decayed_gpu_seconds = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(default=timezone.now)


class JobCheckpoint(models.Model):
    """A step a job can be resumed or cloned from."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "step"]
        constraints = [models.UniqueConstraint(fields=["job", "step"], name="job_checkpoint_step_unique")]


class EventKind(models.TextChoices):
    STATUS = "status"
    METRICS = "metrics"
    LOG = "log"
    SAMPLES = "samples"


class JobEvent(models.Model):
    """Numbered per job (``seq`` from 1), so a client resumes after the last one it saw."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    data = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="job_event_seq_unique")]


class JobMetrics(models.Model):
    """One row per step: every metric the engine reported for it."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField()
    values = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "step"]
        constraints = [models.UniqueConstraint(fields=["job", "step"], name="job_metrics_step_unique")]


class JobMetricsChunk(models.Model):
    """A columnar copy of one job's ``JobMetrics`` rows whose ``step // CHUNK_STEPS`` is
    ``chunk`` (``webapp.jobs.metric_series``): the metric history is read from these instead of
    decoding every step's JSON. Derived data: ``rows`` is how many steps it was built from, and
    a chunk whose count no longer matches the stored steps is rebuilt on the next read."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="metric_chunks")
    chunk = models.PositiveIntegerField()
    rows = models.PositiveIntegerField()
    names = models.JSONField()
    """The metric names, in the order they first appear (the rows of ``values``)."""
    steps = models.BinaryField()
    """``rows`` little-endian float64: the steps, ascending."""
    values = models.BinaryField()
    """``len(names) x rows`` little-endian float64, row-major; NaN where a step lacks a metric."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "chunk"], name="job_metrics_chunk_unique")]


class IdempotencyRecord(models.Model):
    """The first response to an ``Idempotency-Key``; a replay gets it back unchanged."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    key = models.CharField(max_length=200)
    request_hash = models.CharField(max_length=64)
    response_status = models.PositiveIntegerField(null=True)
    response_body = models.JSONField(null=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "key"], name="idempotency_key_unique")]


class EngineCursor(models.Model):
    """How far the control plane has read each engine instance's event log."""

    engine_id = models.CharField(max_length=64, primary_key=True)
    cursor = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
