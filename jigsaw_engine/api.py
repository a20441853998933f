"""The engine's public face: the only module (with ``contracts``) the control plane imports.

Validation, presets and engine hosts. Heavy runtimes (Ray) are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jigsaw_engine.contracts import EngineHost
from jigsaw_engine.control.local_engine import LocalEngine
from jigsaw_engine.envs.dataset_check import DatasetCheck, DatasetRow, check_dataset_text
from jigsaw_engine.errors import FieldError, JigsawError, SpecError
from jigsaw_engine.failpoints import failpoint
from jigsaw_engine.spec.cluster import ClusterSpec, check_fits_cluster, parse_cluster_spec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.presets import PRESETS, REAL_PRESETS

__all__ = [
    "DatasetCheck",
    "DatasetRow",
    "EngineConfig",
    "FieldError",
    "JigsawError",
    "SpecError",
    "check_dataset_text",
    "connect_ray_engine",
    "failpoint",
    "list_presets",
    "resolve_spec",
    "start_local_engine",
    "validate_spec",
]


EngineMode = Literal["simulated", "real"]


@dataclass(frozen=True, slots=True)
class EngineConfig:
    cluster: ClusterSpec
    """The shared cluster the engine plans for."""
    speed: float = 1.0
    """Simulated seconds per wall second for simulated pipelines (``inf``: no pacing)."""
    mode: EngineMode = "simulated"
    """``simulated``: pipelines run on the cost model's clock. ``real``: tiny models are trained
    for real on this machine (device_type ``cpu``; a device is a core), on the wall clock."""
    real_cache_dir: str | None = None
    """Real mode: where warmed-up tiny start policies are kept between jobs."""
    real_checkpoint_dir: str | None = None
    """Real mode: each job checkpoints here after every step (``<dir>/<job id>``)."""

    @classmethod
    def from_mapping(
        cls,
        cluster: Mapping[str, Any],
        *,
        speed: float = 1.0,
        mode: str = "simulated",
        real_cache_dir: str | None = None,
        real_checkpoint_dir: str | None = None,
    ) -> EngineConfig:
        if mode not in ("simulated", "real"):
            raise SpecError([FieldError("mode", f"must be simulated or real, got {mode!r}")])
        parsed = parse_cluster_spec(cluster)
        if mode == "real" and parsed.device_type != "cpu":
            raise SpecError(
                [FieldError("device_type", f"real mode runs on this machine's cores: cpu, got {parsed.device_type!r}")]
            )
        return cls(
            cluster=parsed,
            speed=1.0 if mode == "real" else speed,
            mode="real" if mode == "real" else "simulated",
            real_cache_dir=real_cache_dir,
            real_checkpoint_dir=real_checkpoint_dir,
        )


def validate_spec(
    spec: Mapping[str, Any] | Any, cluster: ClusterSpec | None = None, *, mode: EngineMode = "simulated"
) -> list[FieldError]:
    """Every problem with a user's pipeline spec, paths relative to the spec; [] if it runs."""
    try:
        parsed = parse_pipeline_spec(spec)
    except SpecError as exc:
        return exc.errors
    errors = check_fits_cluster(parsed, cluster) if cluster is not None else []
    if mode == "real":
        from jigsaw_engine.real.checks import check_real_spec

        errors += check_real_spec(parsed)
    return errors


def resolve_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with every default filled in, as stored beside what the user submitted."""
    p = parse_pipeline_spec(spec)
    return {
        "name": p.name,
        "algorithm": p.algorithm.value,
        "model": p.model.name,
        "workload": p.workload.name,
        "data": {
            "train_batch_size": p.train_batch_size,
            **({"train_files": p.train_files, "grader": p.grader} if p.train_files else {}),
        },
        "rollout": {
            "n": p.rollout.n,
            "max_response_length": p.rollout.max_response_length,
            "temperature": p.rollout.temperature,
        },
        "resources": {
            "num_gpus": p.resources.num_gpus,
            "tp": p.resources.tp,
            **({"rollout_gpus": p.resources.rollout_gpus} if p.resources.rollout_gpus else {}),
        },
        "trainer": {
            "total_steps": p.total_steps,
            "ppo_epochs": p.ppo_epochs,
            "save_freq": p.save_freq,
            **({"start_step": p.start_step} if p.start_step else {}),
        },
        "mode": p.mode.value,
        "staleness": p.staleness,
        "priority": p.priority,
        "seed": p.seed,
    }


def list_presets(*, mode: EngineMode = "simulated") -> list[dict[str, Any]]:
    """The submit form's ready-made specs: full-size models, or in real mode tiny ones."""
    chosen = REAL_PRESETS if mode == "real" else PRESETS
    return [{"name": p.name, "title": p.title, "spec": dict(p.spec)} for p in chosen]


def start_local_engine(config: EngineConfig, *, pipeline_actors: bool = False) -> EngineHost:
    """The engine in this process. ``pipeline_actors`` (the engine's own Ray actor sets it):
    real jobs each run in an actor process of their own instead of on this process's threads."""
    if config.mode == "real":
        return LocalEngine(config.cluster, real=_real_backend(config, pipeline_actors=pipeline_actors))
    return LocalEngine(config.cluster, speed=config.speed)


def _real_backend(config: EngineConfig, *, pipeline_actors: bool) -> Any:
    """Imported only in real mode: it brings torch and transformers."""
    from pathlib import Path

    from jigsaw_engine.real.jobs import RealJobOptions
    from jigsaw_engine.real.service_executor import ServiceBackend, ServiceExecutor, ServiceNodeExecutor
    from jigsaw_engine.sched.registry import graph_config_for

    options = RealJobOptions(
        cache_dir=Path(config.real_cache_dir) if config.real_cache_dir else None,
        rollout_workers=config.cluster.num_devices,  # torch engines: a step may run on every core
        worker_actors=pipeline_actors,  # on Ray, each rollout worker and the environment in a process too
    )
    train_parts = graph_config_for("jigsaw").train_minibatches
    checkpoint_root = Path(config.real_checkpoint_dir) if config.real_checkpoint_dir else None
    executor: ServiceNodeExecutor
    if pipeline_actors:
        from jigsaw_engine.real.service_actors import ActorServiceExecutor

        executor = ActorServiceExecutor(
            options, train_parts=train_parts, checkpoint_root=checkpoint_root, cluster=config.cluster
        )
    else:
        executor = ServiceExecutor(options, train_parts=train_parts, checkpoint_root=checkpoint_root)
    return ServiceBackend(executor)


def connect_ray_engine(config: EngineConfig, *, address: str | None) -> EngineHost:
    """Join (or start) the detached engine actor on the Ray cluster at ``address``."""
    from jigsaw_engine.runtime.ray.engine_actor import RayEngineClient

    return RayEngineClient(config, address=address)


# -- a user's JSONL dataset ({"prompt", "answer"} per line): checked and graded, torch-free ----


def grader_names() -> list[str]:
    """The graders a dataset's ``data.grader`` may name."""
    from jigsaw_engine.envs.graders import GRADER_NAMES

    return list(GRADER_NAMES)


def grade(grader: str, completion: str, answer: str) -> float:
    """The reward ``grader`` gives ``completion`` for reference ``answer`` (1.0 or 0.0), as in training."""
    from jigsaw_engine.envs.graders import get_grader

    try:
        grade_fn = get_grader(grader)
    except ValueError as exc:
        raise SpecError([FieldError("grader", str(exc))]) from exc
    return grade_fn(completion, answer.strip())


def grader_answer_problem(grader: str, answer: str) -> str | None:
    """Why ``answer`` could never earn a reward under ``grader``, or None when it can."""
    from jigsaw_engine.envs.graders import check_reference, parse_grader_name

    try:
        grader_name = parse_grader_name(grader)
    except ValueError as exc:
        raise SpecError([FieldError("grader", str(exc))]) from exc
    return check_reference(grader_name, answer.strip())
