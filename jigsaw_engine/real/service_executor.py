"""Real pipelines for the long-running service: they arrive one at a time, while others run.

``jigsaw run`` builds every pipeline before the clock starts; a service cannot. Here a
pipeline is registered when it is submitted and built (tiny policy, warm-up, workers) by its
first sub-stage, on a worker thread (or, on Ray, in its own actor:
:mod:`jigsaw_engine.real.service_actors`), so the engine keeps scheduling meanwhile. Each finished
step leaves its real metrics (the job's own, verl-named) and a few sampled completions for
the controller to report.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from jigsaw_engine.graph.substage import SubStage, SubStageKind
from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.real.pipeline import NodeReport, RealPipeline
from jigsaw_engine.real.real_runtime import NodeExecutor, RealRuntime, ThreadExecutor
from jigsaw_engine.spec.pipeline import PipelineSpec

logger = logging.getLogger(__name__)

SERVICE_POLL_S = 0.02
"""How often the engine loop looks for finished real sub-stages."""


@dataclass(frozen=True, slots=True)
class StepReport:
    metrics: dict[str, float]
    samples: list[dict[str, Any]]


class ServiceExecutor(ThreadExecutor):
    """A :class:`ThreadExecutor` whose pipelines come and go (``pipelines`` holds those built)."""

    def __init__(
        self, options: RealJobOptions, *, train_parts: int, checkpoint_root: Path | None = None, max_workers: int = 8
    ) -> None:
        super().__init__({}, max_workers=max_workers)
        self._options = options
        self._checkpoint_root = checkpoint_root
        self._train_parts = train_parts
        self._specs: dict[str, PipelineSpec] = {}
        self._reports: dict[tuple[str, int], StepReport] = {}
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}

    def register(self, pipeline_id: str, spec: PipelineSpec) -> None:
        """A new pipeline, or one handed back and submitted again (its spec says where to resume)."""
        with self._lock:
            self._specs[pipeline_id] = spec
            self._building.setdefault(pipeline_id, threading.Lock())

    def release(self, pipeline_id: str) -> None:
        """Forget an ended pipeline: a long-running service must not keep every job's model."""
        with self._lock:
            self.pipelines.pop(pipeline_id, None)
            self._specs.pop(pipeline_id, None)

    def submit(self, pipeline_id: str, node: SubStage, devices: tuple[int, ...]) -> Hashable:
        return self._pool.submit(self._run, pipeline_id, node)

    def step_report(self, pipeline_id: str, step: int) -> StepReport | None:
        """What step ``step`` (0-based) of the pipeline measured, once, or None."""
        with self._lock:
            return self._reports.pop((pipeline_id, step), None)

    # -- on worker threads ---------------------------------------------------------------
    def _pipeline(self, pipeline_id: str) -> RealPipeline:
        with self._building[pipeline_id]:  # the first node builds it; others wait for that
            pipeline = self.pipelines.get(pipeline_id)
            if pipeline is None:
                logger.info("building real pipeline %s (tiny policy, warm-up)", pipeline_id)
                options = self._options
                if self._checkpoint_root is not None:
                    options = replace(options, checkpoint_dir=self._checkpoint_root / pipeline_id)
                spec = self._specs[pipeline_id]
                pipeline = build_real_pipeline(
                    spec, train_parts=self._train_parts, options=options, start_step=spec.start_step
                )
                with self._lock:
                    self.pipelines[pipeline_id] = pipeline
            return pipeline

    def _run(self, pipeline_id: str, node: SubStage) -> NodeReport:
        pipeline = self._pipeline(pipeline_id)
        if node.kind is SubStageKind.LOAD:
            return NodeReport(node.node_id, 0.0)
        report = pipeline.run_node(node)
        if report.step_metrics is not None:
            with self._lock:
                self._reports[(pipeline_id, node.step)] = StepReport(dict(report.step_metrics), report.samples or [])
        return report


class ServiceNodeExecutor(NodeExecutor, Protocol):
    """An executor for the service: pipelines are registered as they come, and each finished
    step's report is picked up once."""

    def register(self, pipeline_id: str, spec: PipelineSpec) -> None: ...

    def step_report(self, pipeline_id: str, step: int) -> StepReport | None: ...

    def shutdown(self) -> None: ...


class ServiceBackend:
    """What a :class:`~jigsaw_engine.control.local_engine.LocalEngine` needs to run real
    pipelines: the runtime, where specs go on submit, and each step's real report. The
    pipelines run on threads of the engine's process, or (on Ray) each in its own actor."""

    poll_s = SERVICE_POLL_S

    def __init__(self, executor: ServiceNodeExecutor) -> None:
        self.executor = executor
        self.runtime = RealRuntime(self.executor)

    def register(self, pipeline_id: str, spec: PipelineSpec) -> None:
        self.executor.register(pipeline_id, spec)

    def step_report(self, pipeline_id: str, step: int) -> tuple[dict[str, float], list[dict[str, Any]]] | None:
        report = self.executor.step_report(pipeline_id, step)
        return None if report is None else (report.metrics, report.samples)

    def close(self) -> None:
        self.executor.shutdown()
