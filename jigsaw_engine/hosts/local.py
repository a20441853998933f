"""The engine in this process: its configuration, and the :class:`LocalEngine` it starts, which
plans simulated pipelines or trains real ones on this machine's cores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jigsaw_engine.contracts import EngineHost
from jigsaw_engine.control.local_engine import LocalEngine
from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.spec.cluster import ClusterSpec, parse_cluster_spec

EngineMode = Literal["simulated", "real"]


@dataclass(frozen=True, slots=True)
class EngineConfig:
    cluster: ClusterSpec
    """The shared cluster the engine plans for."""
    speed: float = 1.0
    """Simulated seconds per wall second for simulated pipelines (``inf``: no pacing)."""
    mode: EngineMode = "simulated"
    """``simulated``: pipelines run on the cost model's clock. ``real``: models are trained for
    real, on the wall clock: on this machine's cores (device_type ``cpu``; a device is a core),
    or on GPUs reserved from Ray (a device is a GPU; the engine must then run on Ray)."""
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
        return cls(
            cluster=parsed,
            speed=1.0 if mode == "real" else speed,
            mode="real" if mode == "real" else "simulated",
            real_cache_dir=real_cache_dir,
            real_checkpoint_dir=real_checkpoint_dir,
        )


def start_local_engine(config: EngineConfig, *, pipeline_actors: bool = False) -> EngineHost:
    """The engine in this process. ``pipeline_actors`` (the engine's own Ray actor sets it):
    real jobs each run in an actor process of their own instead of on this process's threads."""
    if config.mode == "real":
        if config.cluster.device_type != "cpu" and not pipeline_actors:
            raise SpecError(
                [
                    FieldError(
                        "device_type",
                        f"real mode on {config.cluster.device_type} GPUs runs each job's work in processes "
                        "holding its GPUs, reserved from Ray: run the engine on Ray (ENGINE_BACKEND=ray), "
                        "or use device_type cpu to train on this process's cores",
                    )
                ]
            )
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
