"""The only door between the control plane and the engine.

Everything else in the webapp talks to the engine through these functions, in plain Python
types; nothing else imports ``jigsaw_engine``. One engine host per process: in-process
(``ENGINE_BACKEND=local``) or the detached Ray actor shared by every process (``ray``).
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from jigsaw_engine import api as engine_api
from jigsaw_engine.contracts import EngineEvent, EngineHost, EventKind, PipelineState

__all__ = [
    "AdmissionEffects",
    "AdmissionWait",
    "CheckpointNotExported",
    "CheckpointStepMissing",
    "EngineEvent",
    "EventKind",
    "ForecastJob",
    "HeldJob",
    "PipelineState",
    "QueuedJob",
    "SpecProblem",
    "TenantLimits",
    "TenantUsage",
    "admission_wait",
    "cancel_pipeline",
    "checkpoint_model_files",
    "cluster_capacity",
    "cluster_timeline",
    "decide_admission",
    "describe_engine",
    "engine_host",
    "engine_mode",
    "failpoint",
    "forecast_job",
    "known_engine_id",
    "list_models",
    "list_presets",
    "list_rewards",
    "pause_pipeline",
    "pipeline_states",
    "pull_events",
    "remove_job_checkpoints",
    "reset_engine_host",
    "resolve_spec",
    "submit_pipeline",
    "validate_spec",
]

# Admission's rules are the engine's pure decision; the admission pass feeds it the database's
# state (the arrivals simulator feeds it its own), so the two cannot drift apart.
AdmissionEffects = engine_api.AdmissionEffects
HeldJob = engine_api.HeldJob
QueuedJob = engine_api.QueuedJob
TenantLimits = engine_api.TenantLimits
TenantUsage = engine_api.TenantUsage
decide_admission = engine_api.decide_admission
# An estimate's queue wait replays that same decision forward over forecasts.
AdmissionWait = engine_api.AdmissionWait
ForecastJob = engine_api.ForecastJob
admission_wait = engine_api.admission_wait

CheckpointNotExported = engine_api.CheckpointNotExported
CheckpointStepMissing = engine_api.CheckpointStepMissing

failpoint = engine_api.failpoint
"""Where a fault-injection run may stop a control-plane process (see ``jigsaw_engine.failpoints``)."""

_host: EngineHost | None = None
_host_lock = threading.Lock()
_pulled_from: str | None = None
"""The engine id the last pull's events came from (see ``known_engine_id``)."""


@dataclass(frozen=True, slots=True)
class SpecProblem:
    field: str
    message: str


def _config() -> engine_api.EngineConfig:
    return engine_api.EngineConfig.from_mapping(
        settings.ENGINE_CLUSTER,
        speed=settings.ENGINE_SPEED,
        mode=settings.ENGINE_MODE,
        real_cache_dir=settings.ENGINE_REAL_CACHE_DIR or None,
        real_checkpoint_dir=settings.ENGINE_REAL_CHECKPOINT_DIR or None,
    )


def engine_host() -> EngineHost:
    """This process's handle on the engine, created on first use."""
    global _host
    with _host_lock:
        if _host is None:
            if settings.ENGINE_BACKEND == "ray":
                _host = engine_api.connect_ray_engine(_config(), address=settings.RAY_ADDRESS or None)
            else:
                _host = engine_api.start_local_engine(_config())
        return _host


def reset_engine_host() -> None:
    """Forget (and close) this process's engine handle; tests and settings changes use it."""
    global _host, _pulled_from
    with _host_lock:
        if _host is not None:
            _host.close()
        _host = None
        _pulled_from = None


def cluster_capacity() -> tuple[str, int]:
    """(device type, number of devices) of the cluster the engine schedules."""
    cluster = _config().cluster
    return cluster.device_type, cluster.num_devices


def engine_mode() -> str:
    """``simulated`` (the cost model's clock, nothing trained) or ``real``: what a job submitted
    now runs as."""
    return _config().mode


def validate_spec(spec: Any) -> list[SpecProblem]:
    config = _config()
    problems = engine_api.validate_spec(spec, config.cluster, mode=config.mode, model_roots=settings.ENGINE_MODEL_ROOTS)
    return [SpecProblem(e.field, e.message) for e in problems]


def resolve_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    return engine_api.resolve_spec(spec)


def list_presets() -> list[dict[str, Any]]:
    return engine_api.list_presets(mode=_config().mode, model_roots=settings.ENGINE_MODEL_ROOTS)


def list_models() -> list[dict[str, Any]]:
    """What a job may train in the engine's mode: catalogue or tiny models, and checkpoints."""
    return engine_api.list_models(mode=_config().mode, model_roots=settings.ENGINE_MODEL_ROOTS)


def list_rewards() -> list[dict[str, Any]]:
    """The reward functions a spec's ``data.grader`` may name: the built-in graders and those the
    operator installed as ``jigsawrl.rewards`` entry points in this process's environment."""
    return engine_api.list_rewards()


def submit_pipeline(*, job_id: str, spec: Mapping[str, Any]) -> None:
    engine_host().submit(job_id, spec)


def cancel_pipeline(*, job_id: str) -> bool:
    return engine_host().cancel(job_id)


def remove_job_checkpoints(*, job_id: str) -> tuple[int, int]:
    """Remove an ended real job's checkpoint files: (files, bytes) removed, (0, 0) when it has
    none (a simulated job, or removed already). The control plane must see the same
    ``ENGINE_REAL_CHECKPOINT_DIR`` as the engine's nodes (shared storage)."""
    root = settings.ENGINE_REAL_CHECKPOINT_DIR
    if not root:
        return 0, 0
    removed = engine_api.remove_job_checkpoints(Path(root), job_id)
    return removed.files, removed.bytes


def checkpoint_model_files(*, job_id: str, step: int) -> list[tuple[str, Path]] | None:
    """A real job's policy after ``step`` as the files of a Hugging Face directory, ``(name,
    path)``; None when this service keeps no checkpoints. CheckpointStepMissing (with the steps
    there are) or CheckpointNotExported when that step has none."""
    root = settings.ENGINE_REAL_CHECKPOINT_DIR
    if not root:
        return None
    return engine_api.checkpoint_model_files(Path(root), job_id, step)


def pause_pipeline(*, job_id: str) -> bool:
    """Ask the engine to stop the job at its next step boundary; False if it does not know it."""
    return engine_host().pause(job_id)


def cluster_timeline(*, window_s: float) -> dict[str, Any]:
    """What ran on which device lately (engine clock), running sub-stages included."""
    return engine_host().timeline(window_s)


def pipeline_states() -> dict[str, str]:
    """Job id -> state for every pipeline the running engine instance knows."""
    return engine_host().pipeline_states()


def pull_events(*, cursor: int, limit: int = 500) -> tuple[str, list[EngineEvent], int]:
    """(engine id, events after ``cursor``, the cursor to store once they are saved)."""
    global _pulled_from
    batch = engine_host().events_since(cursor, limit)
    _pulled_from = batch.engine_id
    return batch.engine_id, batch.events, batch.next_cursor


def known_engine_id() -> str:
    """The engine id the last pull came from; the engine is asked only before the first.

    One engine round trip per pull instead of two: a pump reads its cursor for this id and
    pulls, and a pull that comes back from another id (the engine restarted) tells it so, so
    it reads the new engine's cursor and pulls again."""
    return _pulled_from or engine_host().engine_id


def describe_engine() -> dict[str, Any]:
    return engine_host().describe()


# -- users' datasets (JSONL, Parquet) and their graders ----------------------------------------


@dataclass(frozen=True, slots=True)
class DatasetRow:
    line: int
    prompt: str
    answer: str


@dataclass(frozen=True, slots=True)
class DatasetCheck:
    row_count: int
    problems: list[SpecProblem]
    """The first problems, each ``rows[<line>]``: ``line <n>: ...``."""
    problem_count: int
    preview: list[DatasetRow]
    format: str = "jsonl"
    """``jsonl`` or ``parquet``: how the engine read the file."""


def check_dataset(
    content: str | bytes,
    *,
    filename: str = "dataset.jsonl",
    grader: str | None = None,
    max_problems: int = 50,
    preview_rows: int = 5,
) -> DatasetCheck:
    """Every row of a dataset checked as the engine will read it; ValueError for an unknown grader.

    The format is ``filename``'s suffix (``.jsonl``, ``.parquet``), else Parquet's magic bytes."""
    try:
        found = engine_api.check_dataset_text(
            content, filename, grader=grader, max_problems=max_problems, preview_rows=preview_rows
        )
    except engine_api.SpecError as exc:
        raise ValueError("; ".join(e.message for e in exc.errors)) from exc
    return DatasetCheck(
        row_count=found.row_count,
        problems=[SpecProblem(p.field, p.message) for p in found.problems],
        problem_count=found.problem_count,
        preview=[DatasetRow(r.line, r.prompt, r.answer) for r in found.preview],
        format=found.format,
    )


def grader_names() -> list[str]:
    return engine_api.grader_names()


def grade(*, grader: str, completion: str, answer: str) -> tuple[float, str]:
    """The engine's reward for ``completion`` against ``answer``, and why an installed reward
    failed on it (it then scores 0; empty when it scored); ValueError for an unknown grader."""
    try:
        return engine_api.grade_reply(grader, completion, answer)
    except engine_api.SpecError as exc:
        raise ValueError("; ".join(e.message for e in exc.errors)) from exc


def grader_answer_problem(*, grader: str, answer: str) -> str | None:
    """Why ``answer`` could never earn a reward under ``grader``; None when it can."""
    try:
        return engine_api.grader_answer_problem(grader, answer)
    except engine_api.SpecError as exc:
        raise ValueError("; ".join(e.message for e in exc.errors)) from exc


# -- a job's forecast before it is submitted ---------------------------------------------------


def forecast_job(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The simulator's forecast of a valid spec alone on the engine's cluster: ``step_s``,
    ``total_s`` (engine seconds), ``device_seconds`` (as billed), ``steps``, ``num_gpus``...
    Deterministic for a spec and a configuration, so recent answers are kept: the submit form
    asks again at each edit, and the queue estimate asks for every job ahead."""
    config = _config()
    key = (json.dumps(spec, sort_keys=True, default=str), config)
    return dict(_cached_forecast(key))


@functools.lru_cache(maxsize=512)
def _cached_forecast(key: tuple[str, engine_api.EngineConfig]) -> Mapping[str, Any]:
    spec, config = json.loads(key[0]), key[1]
    return engine_api.forecast_job(spec, config.cluster, mode=config.mode)
