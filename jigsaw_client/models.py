"""Response shapes, as the OpenAPI schema's components describe them (``JobOutput``,
``LogsOutput``, ``JobEventOutput``; the quota report is an open object there)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

JobStatus = Literal[
    "queued",
    "starting",
    "running",
    "recovering",
    "pausing",
    "paused",
    "cancelling",
    "succeeded",
    "failed",
    "cancelled",
]
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
EngineMode = Literal["simulated", "real"]


class Progress(TypedDict):
    step: int
    total_steps: int


class Job(TypedDict):
    id: str
    name: str
    tenant: str
    status: JobStatus
    status_reason: str
    failure_class: str
    engine_mode: EngineMode
    queue_position: int | None
    progress: Progress
    num_gpus: int
    device_type: str
    priority: float
    tags: list[str]
    attempt: int
    borrowed: bool
    gpu_seconds: float
    cloned_from: str | None
    last_event_seq: int
    spec: dict[str, Any]
    resolved_spec: dict[str, Any]
    created_at: str
    started_at: str | None
    finished_at: str | None


class JobPage(TypedDict):
    results: list[Job]
    next: str | None


class LogLine(TypedDict):
    seq: int
    created_at: str
    level: str
    message: str


class LogPage(TypedDict):
    results: list[LogLine]
    next_after: int | None


class JobEvent(TypedDict):
    seq: int
    kind: Literal["status", "metrics", "log"]
    created_at: str
    # status: {"status", "reason"}; metrics: {"step", "total_steps", "metrics"}; log: {"level", "message"}
    data: dict[str, Any]


class EventPage(TypedDict):
    results: list[JobEvent]


class Checkpoint(TypedDict):
    step: int
    created_at: str
    # Where its model downloads (a tar of a Hugging Face directory); None for a simulated job.
    download_url: str | None


class CheckpointPage(TypedDict):
    results: list[Checkpoint]


class QuotaUsage(TypedDict):
    gpus_held: int
    borrowed_gpus: int
    running_jobs: int
    queued_jobs: int
    gpu_hours_this_month: float


class Quota(TypedDict):
    tenant: str
    device_type: str
    cluster_gpus: int
    limits: dict[str, Any]
    usage: QuotaUsage


class ErrorDetail(TypedDict):
    field: str
    message: str
