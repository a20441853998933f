"""The service's real pipelines on Ray: each job in its own :class:`PipelineActor` process.

On threads of the engine's process (:class:`~jigsaw_engine.real.service_executor.ServiceExecutor`)
every job shares one interpreter, and a crash in one takes the engine down. Here each job's
policy, trainer and rollout workers live in an actor of their own: jobs really run on
separate cores, and a worker process that dies (killed, out of memory, its node gone) costs
that job its current step, not the engine. The executor reports such a death as
:class:`~jigsaw_engine.errors.WorkerLostError`; the controller hands the job back, and the
control plane resumes it from its latest checkpoint.

The actors are owned by the engine's actor, so they die with it (an engine restart resumes
every job from its checkpoint anyway). Given the engine's cluster, its devices are reserved from
Ray while any job runs (:class:`~jigsaw_engine.runtime.ray.placement.DevicePlacement`) and given
back when the last one ends, so an idle engine holds nothing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

from jigsaw_engine.errors import WorkerLostError
from jigsaw_engine.graph.substage import SubStage
from jigsaw_engine.real.jobs import RealJobOptions
from jigsaw_engine.real.pipeline import NodeReport
from jigsaw_engine.real.pipeline_actor import (
    PipelineActor,
    node_cores,
    pipeline_actor_options,
    placed_job_options,
    wait_for_refs,
)
from jigsaw_engine.real.service_executor import StepReport
from jigsaw_engine.runtime.ray.nodes import NODE_DEATH_NOTICE_S, NodeWatch, avoiding
from jigsaw_engine.runtime.ray.placement import DevicePlacement
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec


class ActorServiceExecutor:
    """A :class:`~jigsaw_engine.real.service_executor.ServiceNodeExecutor` with one actor per job."""

    def __init__(
        self,
        options: RealJobOptions,
        *,
        train_parts: int,
        checkpoint_root: Path | None = None,
        torch_threads: int = 1,
        cluster: ClusterSpec | None = None,
    ) -> None:
        self._options = options
        self._cluster = cluster
        self.placement: DevicePlacement | None = None
        """Held while any job has an actor or any of its nodes is lost (None without ``cluster``)."""
        self._watch: NodeWatch | None = None
        """Which of the placement's nodes Ray holds now (with the placement)."""
        self._lost_nodes: set[int] = set()
        self._on_nodes: dict[str, set[int]] = {}
        """Per job, the engine nodes its processes may be on: those not lost when it started
        (its rollout worker ``w`` lives on device ``w``, wherever its own process is)."""
        self._hold_until = 0.0
        """After a worker loss, the reservation is kept this long, even idle: the loss may be a
        node's that Ray has not declared dead yet, and a reservation made meanwhile would wait
        for it."""
        self._train_parts = train_parts
        self._checkpoint_root = checkpoint_root
        self._torch_threads = torch_threads
        self._num_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else 0
        self._lock = threading.Lock()
        self._specs: dict[str, PipelineSpec] = {}
        self._actors: dict[str, Any] = {}
        self._nodes: dict[Hashable, tuple[str, int]] = {}
        """Object ref of a running node -> (pipeline id, step)."""
        self._reports: dict[tuple[str, int], StepReport] = {}

    def register(self, pipeline_id: str, spec: PipelineSpec) -> None:
        with self._lock:
            self._specs[pipeline_id] = spec

    def submit(self, pipeline_id: str, node: SubStage, devices: tuple[int, ...]) -> Hashable:
        cores = node_cores(devices, self._num_cores, self._cluster)
        ref: Hashable = self._actor(pipeline_id, devices[0] if devices else 0).run_node.remote(node, cores, devices)
        with self._lock:
            self._nodes[ref] = (pipeline_id, node.step)
        return ref

    def wait(self, handles: Sequence[Hashable], timeout_s: float) -> list[Hashable]:
        return wait_for_refs(handles, timeout_s)

    def result(self, handle: Hashable) -> NodeReport:
        with self._lock:
            pipeline_id, step = self._nodes.pop(handle)
        get: Any = ray.get  # handles are ObjectRefs, typed as Hashable at the protocol
        try:
            report: NodeReport = get(handle)
        except RayActorError as exc:  # the process died; a failing node raises RayTaskError
            self._hold_until = time.monotonic() + NODE_DEATH_NOTICE_S
            raise WorkerLostError(f"the worker process of {pipeline_id} died ({type(exc).__name__})") from exc
        except WorkerLostError as exc:  # one of its rollout workers' processes died under the node
            self._hold_until = time.monotonic() + NODE_DEATH_NOTICE_S
            raise WorkerLostError(f"a rollout worker process of {pipeline_id} died") from exc
        if report.step_metrics is not None:
            with self._lock:
                self._reports[(pipeline_id, step)] = StepReport(dict(report.step_metrics), report.samples or [])
        return report

    def step_report(self, pipeline_id: str, step: int) -> StepReport | None:
        with self._lock:
            return self._reports.pop((pipeline_id, step), None)

    def release(self, pipeline_id: str) -> None:
        """The job ended or was handed back: its process goes (a resubmission starts a new one)."""
        with self._lock:
            actor = self._actors.pop(pipeline_id, None)
            self._specs.pop(pipeline_id, None)
            self._on_nodes.pop(pipeline_id, None)
        if actor is not None:
            ray.kill(actor, no_restart=True)
        self._give_back_devices_if_idle()

    def lost_devices(self) -> dict[int, str]:
        """Devices whose Ray node is gone (:class:`NodeWatch`); none while nothing is reserved.
        Called at every event, it also settles what a node's loss or return changes: a job with
        processes on a node just lost is stopped whole (its next call finds it dead, and the
        controller hands it back), and an idle reservation is given back once nothing is lost."""
        watch = self._watch
        if watch is None:
            return {}
        lost = watch.lost_nodes()
        gone = set(lost) - self._lost_nodes
        self._lost_nodes = set(lost)
        if gone:
            with self._lock:
                stopped = [(pid, a) for pid, a in self._actors.items() if self._on_nodes.get(pid, set()) & gone]
            for _, actor in stopped:
                ray.kill(actor, no_restart=True)  # kept in _actors: its calls now raise, and it is handed back
        if not lost:
            self._give_back_devices_if_idle()
        return watch.lost_devices()

    def shutdown(self) -> None:
        with self._lock:
            actors, self._actors = list(self._actors.values()), {}
        for actor in actors:
            ray.kill(actor, no_restart=True)
        self._give_back_devices_if_idle(closing=True)

    def _give_back_devices_if_idle(self, *, closing: bool = False) -> None:
        """An idle engine holds nothing, except while a node is lost (Ray places its group again
        when a node joins: the devices come back where a new reservation would be refused for
        want of a node) or may be (:attr:`_hold_until`)."""
        hold = not closing and (bool(self._lost_nodes) or time.monotonic() < self._hold_until)
        with self._lock:
            placement = self.placement if not self._actors and not hold else None
            if placement is not None:
                self.placement, self._watch, self._lost_nodes = None, None, set()
        if placement is not None:
            placement.remove()

    def _actor(self, pipeline_id: str, device: int) -> Any:
        """The job's process, started on ``device`` (where its first node runs) if it has none."""
        with self._lock:
            actor = self._actors.get(pipeline_id)
            if actor is None:
                if self.placement is None and self._cluster is not None:
                    # Waits for Ray (milliseconds; a too-small Ray cluster fails the job, saying why).
                    self.placement = DevicePlacement(self._cluster)
                    self._watch = NodeWatch(self.placement)
                spec = self._specs[pipeline_id]
                # Nothing of a job started now goes to a lost node: it would wait there, unstarted.
                placement = self.placement
                if placement is not None and self._watch is not None:
                    lost = self._watch.lost_nodes()
                    placement = avoiding(placement, lost)
                    self._on_nodes[pipeline_id] = set(range(self._cluster.num_nodes if self._cluster else 1)) - set(
                        lost
                    )
                options = placed_job_options(self._options, self._cluster, placement, device)
                if self._checkpoint_root is not None:
                    options = replace(options, checkpoint_dir=self._checkpoint_root / pipeline_id)
                # Ray books a sliver of the device (on GPUs, none); the scheduler decides where a node runs.
                actor_options = pipeline_actor_options(placement, device)
                actor = self._actors[pipeline_id] = PipelineActor.options(**actor_options).remote(  # type: ignore[attr-defined]
                    spec, self._train_parts, self._torch_threads, options, spec.start_step
                )
            return actor
