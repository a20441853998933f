"""Real pipelines as Ray actors, and the executor that hands them sub-stages.

Each pipeline lives in its own actor process: its policy, trainer and rollout engines, built
there from the spec (torch never crosses the object store). The actor is threaded so that the
rollout nodes of different data-parallel workers can run at once, as the scheduler placed
them. On a CPU cluster a device is a core: a rollout worker's thread runs on its core with
one torch thread, and a pipeline-wide forward or update uses as many torch threads as it was
given cores (the scheduler charges a two-core update half the time of a one-core one; one
thread on two cores trained at 1.0x, two at 1.7x, on tiny-qwen2-1m).

On a GPU cluster a device is a GPU, and the pipeline's actor does no device work: it holds no
GPU, its threads are not pinned (device ids are GPUs, not cores), and each node's work runs in
the processes that hold the node's GPUs: the rollout worker's engine for a rollout node, the
trainer group's ranks for a forward or an update, both moved to the node's devices first where
the scheduler placed it elsewhere (:class:`~jigsaw_engine.real.jobs.RealJobOptions` ``on_gpus``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import ray

from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.graph.substage import SubStage, SubStageKind
from jigsaw_engine.models.compute import resolve_compute_device
from jigsaw_engine.models.loading import weights_digest
from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.real.pipeline import NodeReport, RealPipeline
from jigsaw_engine.runtime.host_allocator import ONE_ARENA_ENV, keep_freed_memory
from jigsaw_engine.runtime.ray.placement import (
    DevicePlacement,
    devices_seen,
    placed_on_host,
    trains_across_devices,
)
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from jigsaw_engine.workload.plans import SequencePlan

MULTI_THREADED_KINDS = frozenset({SubStageKind.OLD_LOGPROB, SubStageKind.REF_LOGPROB, SubStageKind.TRAIN})
"""Pipeline-wide torch work, whose torch thread count follows the node's cores. Torch's OpenMP
count is the calling thread's own (once the thread has run torch: a thread's first parallel
call takes the count last set anywhere), and every node sets its lane's before it runs, so an
asynchronous pipeline's next rollout, on a worker's lane meanwhile, keeps its one thread."""

ROLLOUT_KINDS = frozenset({SubStageKind.PREFILL, SubStageKind.DECODE})
"""Nodes that run in a rollout worker's engine."""
TRAINER_KINDS = MULTI_THREADED_KINDS | {SubStageKind.WEIGHT_SYNC, SubStageKind.LOAD}
"""Nodes that run in (or, for ``load``, start) the trainer: on GPUs, in its ranks."""


@ray.remote(max_concurrency=8)  # type: ignore[call-overload]
class PipelineActor:
    def __init__(
        self,
        spec: PipelineSpec | dict[str, Any],
        train_parts: int,
        torch_threads: int,
        options: RealJobOptions,
        start_step: int | None = None,
    ) -> None:
        """``start_step`` as :class:`RealPipeline` takes it: None resumes after the latest
        checkpoint in ``options.checkpoint_dir`` (a restarted actor), a number after that step."""
        import torch

        keep_freed_memory()  # its lanes' heaps would otherwise be faulted in again every step
        torch.set_num_threads(torch_threads)
        self._torch_threads = torch_threads
        self._all_cores = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
        self._spec = spec if isinstance(spec, PipelineSpec) else parse_pipeline_spec(spec)
        self._train_parts = train_parts
        self._options = options
        self._start_step = start_step
        self._build_lock = threading.Lock()
        self._built: RealPipeline | None = None
        self._lanes: dict[int | None, ThreadPoolExecutor] = {}
        self._lanes_lock = threading.Lock()
        self._ran_on: list[dict[str, Any]] = []
        """On a GPU cluster, per node run: where it was placed and the GPUs of the processes that ran it."""
        placement = options.placement
        self._device_memory = (
            load_device_profile(placement.cluster.device_type).memory_bytes if options.on_gpus and placement else 0.0
        )

    @property
    def _pipeline(self) -> RealPipeline:
        """Built by the first call, not the constructor: a spec that cannot be built is then a
        failed call (the job fails, saying why), never a dead actor (a lost worker)."""
        with self._build_lock:
            if self._built is None:
                self._built = build_real_pipeline(
                    self._spec, train_parts=self._train_parts, options=self._options, start_step=self._start_step
                )
            return self._built

    def build(self) -> None:
        """Build now (tokenizer, warm-up: seconds), so that the first node does not pay it."""
        _ = self._pipeline

    def run_node(self, node: SubStage, cores: tuple[int, ...], devices: tuple[int, ...] = ()) -> NodeReport:
        """Run ``node`` on its lane's thread pinned to ``cores``: on a CPU cluster a device is
        a core, and pinning makes the scheduler's placement the real one (the OS would
        otherwise spread every thread over every core). On a GPU cluster (no ``cores``) its
        work runs in the processes holding ``devices``, its GPUs."""
        if self._options.on_gpus:
            return self._lane(node.worker).submit(self._run_on_gpus, node, devices).result()
        return self._lane(node.worker).submit(self._run_pinned, node, cores).result()

    def _lane(self, worker: int | None) -> ThreadPoolExecutor:
        """One thread per rollout worker, and one for the pipeline-wide nodes. Ray hands each
        call to whichever of the actor's threads is free, and glibc gives every thread a heap
        arena of its own: an update that ran on a new thread each time found none of the
        previous one's freed memory and faulted it in afresh. A lane keeps a kind of work on
        one thread, so its memory is reused. It also keeps torch's OpenMP to one team: each
        thread that runs multi-threaded torch keeps a team of its own, and with more OpenMP
        threads than cores libgomp sleeps at barriers instead of spinning, so a second team
        makes two-thread updates much slower (figures in ``docs/real-runs.md``)."""
        with self._lanes_lock:
            if worker not in self._lanes:
                name = "pipeline-wide" if worker is None else f"rollout-worker-{worker}"
                self._lanes[worker] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
            return self._lanes[worker]

    def _run_pinned(self, node: SubStage, cores: tuple[int, ...]) -> NodeReport:
        pipeline = self._pipeline
        if hasattr(os, "sched_setaffinity"):
            # 0 = the calling thread on Linux; host-bound nodes (no devices) may use any core.
            os.sched_setaffinity(0, set(cores) or self._all_cores)
        import torch

        wide = node.kind in MULTI_THREADED_KINDS and len(cores) > 1
        torch.set_num_threads(len(cores) if wide else self._torch_threads)
        if node.kind in MULTI_THREADED_KINDS and cores:
            pin_ranks = getattr(pipeline.job.trainer, "pin", None)  # a trainer group: a rank per core
            if pin_ranks is not None:
                pin_ranks(cores)
        engines = pipeline.job.engines
        if node.kind is SubStageKind.DECODE and cores and node.worker is not None and node.worker < len(engines):
            pin = getattr(engines[node.worker], "pin", None)  # a rollout worker in an actor of its own
            if pin is not None:
                pin(cores)
        return pipeline.run_node(node)

    def _run_on_gpus(self, node: SubStage, devices: tuple[int, ...]) -> NodeReport:
        """Move the node's workers to its GPUs (where the scheduler placed it elsewhere), record
        which GPUs they hold, then run it. Threads keep the host's every core and one torch
        thread: device ids are GPUs, not cores to pin. ``load`` starts the job's workers on its
        devices: the trainer group across them, rollout worker ``w`` on the ``w``-th."""
        pipeline = self._pipeline
        held: list[dict[str, Any]] | None = None  # the processes doing its device work; None: none does
        trainer: Any = pipeline.job.trainer
        engines: list[Any] = list(pipeline.job.engines)
        share = node.mem_bytes / self._device_memory if self._device_memory else None
        if devices and node.kind in TRAINER_KINDS:
            trainer.place(devices)
            held = trainer.seen()
        if devices and node.kind is SubStageKind.LOAD:
            for device, engine in zip(devices, engines, strict=False):
                engine.place((device,), share)
        elif devices and node.kind in ROLLOUT_KINDS and node.worker is not None and node.worker < len(engines):
            engines[node.worker].place(devices, share)
            held = [engines[node.worker].seen]
        report = pipeline.run_node(node)
        self._ran_on.append(
            {
                "kind": node.kind.value,
                "bucket": node.bucket,
                "step": node.step,
                "worker": node.worker,
                "devices": list(devices),
                "gpu_ids": None if held is None else [list(seen["gpu_ids"]) for seen in held],
            }
        )
        return report

    def device_report(self) -> dict[str, Any]:
        """Where this job's work ran, as its processes saw it (:func:`devices_seen`): this
        process, each trainer rank, each rollout worker (its device, its engine's weights'
        digest and policy version), the trainer's weights' digest, and per node run on a GPU
        cluster its devices and its processes' GPU ids."""
        job = self._pipeline.job
        trainer: Any = job.trainer
        ranks = trainer.seen() if hasattr(trainer, "seen") else []
        engines: list[Any] = list(job.engines)
        return {
            "process": devices_seen(),
            "compute": self._options.compute,
            "trainer": {
                "devices": list(getattr(trainer, "devices", ())),
                "moves": getattr(trainer, "moves", 0),
                "ranks": ranks,
                "weights": weights_digest(trainer.weights()),
                "version": job.step,
            },
            "workers": [
                {**(e.report() if hasattr(e, "report") else {}), "version": job.engine_version(w)}
                for w, e in enumerate(engines)
            ],
            "nodes": list(self._ran_on),
        }

    def step_metrics(self) -> list[dict[str, float]]:
        return list(self._pipeline.step_metrics)

    def step_plans(self) -> dict[int, list[SequencePlan]]:
        return dict(self._pipeline.job.step_plans)

    def run_steps(self, count: int) -> list[dict[str, float]]:
        """Whole steps, each checkpointed (when the options name a folder) before the next."""
        return [self._pipeline.run_step() for _ in range(count)]

    def progress(self) -> dict[str, Any]:
        """Where the job is: its next step, the step it resumed at, a digest of its weights."""
        return {
            "step": self._pipeline.job.step,
            "resumed_at_step": self._pipeline.resumed_at_step,
            "weights": weights_digest(self._pipeline.job.trainer.weights()),
        }


def pipeline_actor_options(placement: DevicePlacement | None, device: int) -> dict[str, Any]:
    """``PipelineActor.options(...)``: placed on ``device`` (on a GPU cluster on its node, with
    no GPU: :meth:`DevicePlacement.host_options`), its worker process started with one malloc
    arena (:data:`ONE_ARENA_ENV`)."""
    options = placed_on_host(placement, device)
    env = {**options.get("runtime_env", {}).get("env_vars", {}), **ONE_ARENA_ENV}
    return {**options, "runtime_env": {"env_vars": env}}


def placed_job_options(
    options: RealJobOptions, cluster: ClusterSpec | None, placement: DevicePlacement | None, home_device: int
) -> RealJobOptions:
    """A job's options on the executors' cluster: its devices' reservation, its home device,
    a trainer group by default on GPUs, and on a GPU cluster its work in processes holding
    its GPUs, computing on what this process resolves (CUDA, or the CPU where the GPUs are
    only declared)."""
    on_gpus = cluster is not None and cluster.device_type != "cpu"
    return replace(
        options,
        placement=placement,
        home_device=home_device,
        train_across_devices=options.train_across_devices or trains_across_devices(cluster),
        on_gpus=on_gpus,
        compute=resolve_compute_device().kind if on_gpus else "cpu",
    )


def node_cores(devices: tuple[int, ...], num_cores: int, cluster: ClusterSpec | None) -> tuple[int, ...]:
    """The cores a node's threads are pinned to: on a CPU cluster its devices (modulo this
    host's cores); none on a GPU cluster, whose device ids are GPUs."""
    if num_cores < 1 or (cluster is not None and cluster.device_type != "cpu"):
        return ()
    return tuple(d % num_cores for d in devices)


def wait_for_refs(handles: Sequence[Hashable], timeout_s: float) -> list[Hashable]:
    """Every finished handle, waiting up to ``timeout_s`` for the first (the executors' ``wait``)."""
    refs = list(handles)
    ready, rest = ray.wait(refs, num_returns=1, timeout=max(0.0, timeout_s))
    if ready and rest:
        more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
        ready += more
    return list(ready)


class RayExecutor:
    """:class:`~jigsaw_engine.real.real_runtime.NodeExecutor` over one actor per pipeline."""

    def __init__(
        self,
        specs: Mapping[str, Mapping[str, Any]],
        *,
        train_parts: int,
        torch_threads: int = 1,
        options: RealJobOptions | None = None,
        pin_devices: bool = True,
        cluster: ClusterSpec | None = None,
    ) -> None:
        """With ``cluster``, its devices are reserved from Ray (:class:`DevicePlacement`) and
        pipeline ``i`` and its environment live on device ``i`` (its rollout worker ``w`` on
        device ``w``); without, the actors book nothing from Ray. Either way the scheduler, not
        Ray, decides which cores each node runs on."""
        options = options or RealJobOptions()
        self._pin = pin_devices and hasattr(os, "sched_setaffinity")
        self._num_cores = len(os.sched_getaffinity(0)) if self._pin else 0
        self._cluster = cluster
        self.placement = DevicePlacement(cluster) if cluster is not None else None
        self.actors = {}
        for i, (pid, spec) in enumerate(specs.items()):
            placed_options = placed_job_options(options, cluster, self.placement, i)
            self.actors[pid] = PipelineActor.options(**pipeline_actor_options(self.placement, i)).remote(  # type: ignore[attr-defined]
                dict(spec), train_parts, torch_threads, placed_options
            )
        # Building a pipeline (tokenizer, warm-up) takes seconds: wait here, not inside a node.
        ray.get([actor.build.remote() for actor in self.actors.values()])

    def submit(self, pipeline_id: str, node: SubStage, devices: tuple[int, ...]) -> Hashable:
        cores = node_cores(devices, self._num_cores, self._cluster)
        ref: Hashable = self.actors[pipeline_id].run_node.remote(node, cores, devices)
        return ref

    def wait(self, handles: Sequence[Hashable], timeout_s: float) -> list[Hashable]:
        return wait_for_refs(handles, timeout_s)

    def result(self, handle: Hashable) -> NodeReport:
        get: Any = ray.get  # handles are ObjectRefs, typed as Hashable at the protocol
        report: NodeReport = get(handle)
        return report

    def release(self, pipeline_id: str) -> None:
        """Kept: the run's report reads every actor's metrics after the run."""

    def step_metrics(self) -> dict[str, list[dict[str, float]]]:
        return {pid: ray.get(actor.step_metrics.remote()) for pid, actor in self.actors.items()}

    def step_plans(self) -> dict[str, dict[int, list[SequencePlan]]]:
        return {pid: ray.get(actor.step_plans.remote()) for pid, actor in self.actors.items()}

    def device_reports(self) -> dict[str, dict[str, Any]]:
        """Each pipeline's :meth:`PipelineActor.device_report`."""
        return {pid: ray.get(actor.device_report.remote()) for pid, actor in self.actors.items()}

    def shutdown(self) -> None:
        for actor in self.actors.values():
            ray.kill(actor)
        if self.placement is not None:
            self.placement.remove()
