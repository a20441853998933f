"""The engine's public face: the only module (with ``contracts``) the control plane imports.

Validation, presets and engine hosts. Heavy runtimes (Ray) are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jigsaw_engine.contracts import EngineHost
from jigsaw_engine.control.local_engine import LocalEngine
from jigsaw_engine.errors import FieldError, JigsawError, SpecError
from jigsaw_engine.spec.cluster import ClusterSpec, check_fits_cluster, parse_cluster_spec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.presets import PRESETS

__all__ = [
    "EngineConfig",
    "FieldError",
    "JigsawError",
    "SpecError",
    "connect_ray_engine",
    "list_presets",
    "resolve_spec",
    "start_local_engine",
    "validate_spec",
]


@dataclass(frozen=True, slots=True)
class EngineConfig:
    cluster: ClusterSpec
    """The shared cluster the engine plans for."""
    speed: float = 1.0
    """Simulated seconds per wall second for simulated pipelines (``inf``: no pacing)."""

    @classmethod
    def from_mapping(cls, cluster: Mapping[str, Any], *, speed: float = 1.0) -> EngineConfig:
        return cls(cluster=parse_cluster_spec(cluster), speed=speed)


def validate_spec(spec: Mapping[str, Any] | Any, cluster: ClusterSpec | None = None) -> list[FieldError]:
    """Every problem with a user's pipeline spec, paths relative to the spec; [] if it runs."""
    try:
        parsed = parse_pipeline_spec(spec)
    except SpecError as exc:
        return exc.errors
    return check_fits_cluster(parsed, cluster) if cluster is not None else []


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


def list_presets() -> list[dict[str, Any]]:
    return [{"name": p.name, "title": p.title, "spec": dict(p.spec)} for p in PRESETS]


def start_local_engine(config: EngineConfig) -> EngineHost:
    return LocalEngine(config.cluster, speed=config.speed)


def connect_ray_engine(config: EngineConfig, *, address: str | None) -> EngineHost:
    """Join (or start) the detached engine actor on the Ray cluster at ``address``."""
    from jigsaw_engine.runtime.ray.engine_actor import RayEngineClient

    return RayEngineClient(config.cluster, speed=config.speed, address=address)
