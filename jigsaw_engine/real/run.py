"""Run a workload file's pipelines for real, under several policies side by side.

Each policy gets freshly built pipelines from the same specs and seeds (so the same warmed-up
policies and the same data), runs them to the end on the wall clock, and is reported with the
real token counts the engines produced. ``serial`` runs one pipeline at a time with the cluster
to itself (verl on a shared cluster, one job after another, each at its best width);
``dedicated`` gives each pipeline its own devices at once (verl with static partitions);
``jigsaw`` and ``greedy`` multiplex sub-stages. ``verl`` in
the report is the better of ``serial`` and ``dedicated``, as in the simulator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Literal

from jigsaw_engine.bench.compare import compare_policies, pipeline_figures, policy_figures
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.run_record import TimelineSpan
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile, slowed_down
from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.graph.builder import GraphConfig
from jigsaw_engine.real.jobs import check_real_spec
from jigsaw_engine.real.real_runtime import NodeExecutor, RealRuntime
from jigsaw_engine.runtime.machine_speed import slowdown_range
from jigsaw_engine.sched.registry import make_scheduler, real_graph_config_for
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from jigsaw_engine.spec.workload_file import WorkloadFile
from jigsaw_engine.workload.plans import SequencePlan

RealPolicy = Literal["serial", "dedicated", "greedy", "jigsaw"]
REAL_POLICIES: tuple[RealPolicy, ...] = ("serial", "dedicated", "greedy", "jigsaw")
VERL = {"verl": ("serial", "dedicated")}
"""``verl`` in the report: the better of its two deployments on a shared cluster."""

ExecutorFactory = Callable[[Mapping[str, Mapping[str, Any]], int, ClusterSpec], NodeExecutor]
"""Builds the executor for a set of pipelines (id -> spec), the train parts per step, on the cluster."""
Progress = Callable[[str, Mapping[str, tuple[int, int]]], None]
"""(policy, pipeline id -> (steps done, total steps)), after every event."""
MachineSpeed = Callable[[], float]
"""Seconds of the profile's reference work on this machine now
(:func:`jigsaw_engine.runtime.machine_speed.reference_seconds`)."""


def check_real_workload(workload: WorkloadFile, *, steps: int | None, on_ray: bool = True) -> dict[str, dict[str, Any]]:
    """The workload's pipeline specs, with ``steps`` applied, keyed by a unique id; every problem
    at once. ``on_ray``: the run's executor reserves its devices from Ray, which a GPU cluster
    needs (its devices are GPUs Ray gives to processes; threads of one process cannot hold one)."""
    errors: list[FieldError] = []
    specs: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(workload.pipelines):
        spec = dict(raw)
        if steps is not None:
            spec["trainer"] = {**dict(spec.get("trainer", {})), "total_steps": steps}
        parsed = parse_pipeline_spec(spec)
        errors += check_real_spec(parsed, path=f"pipelines[{i}]")
        specs[f"p{i}-{parsed.name}"] = spec
    if workload.cluster.device_type != "cpu" and not on_ray:
        errors.append(
            FieldError(
                "cluster.device_type",
                f"the cluster's devices are {workload.cluster.device_type} GPUs reserved from Ray, each held "
                "by the processes that run on it; run it on Ray (--executor ray or ray-split), or declare "
                "device_type: cpu to run on this process's cores",
            )
        )
    if errors:
        raise SpecError(errors)
    return specs


def run_real_workload(
    workload: WorkloadFile,
    policies: Sequence[RealPolicy],
    *,
    make_executor: ExecutorFactory,
    steps: int | None = None,
    progress: Progress | None = None,
    prefix_cache: bool = False,
    workers_share_process: bool = False,
    machine_speed: MachineSpeed | None = None,
    rollout_engine: str | None = None,
) -> dict[str, Any]:
    """Each policy's real run of ``workload`` beside the simulator's forecast of it.
    ``rollout_engine``: the engine the rollouts run on (``torch``, ``vllm``), whose constants
    the device profile may hold apart (:func:`load_device_profile`); its scheduler plans with
    them too, as the forecast replays it.
    ``prefix_cache``: the rollout engine keeps conversations' KV cache across turns (vLLM; the
    torch engine prefills each turn's whole conversation), as the graphs must charge it.
    ``workers_share_process``: a job's rollout workers are threads of one process (the torch
    engine in a pipeline actor), so the graphs charge what they wait for each other's
    interpreter lock (:attr:`GraphConfig.workers_share_process`).
    ``machine_speed``, timed before and after each run, scales the forecast's profile by how
    much slower the machine runs than when the profile was measured (its ``reference_s``);
    without it, or for a profile with no reference, the forecast takes the profile as it is."""
    specs = check_real_workload(workload, steps=steps)
    graph = partial(real_graph, prefix_cache=prefix_cache, workers_share_process=workers_share_process)
    run = partial(
        _run,
        make_executor=make_executor,
        progress=progress,
        graph=graph,
        speed=machine_speed,
        rollout_engine=rollout_engine,
    )

    def run_one(policy: str) -> dict[str, Any]:
        if policy == "serial":
            return _merge_serial([_run_alone(workload.cluster, pid, spec, run) for pid, spec in specs.items()])
        return run(workload.cluster, policy, specs, label=policy)

    # verl: the better of its deployments that ran; each pipeline's latency alone: serial's.
    result = compare_policies(workload, [*policies, "verl"], run_one, runs=policies, composites=VERL, alone="serial")
    return {**result, "real": True}


def _run_alone(
    cluster: ClusterSpec, pid: str, spec: Mapping[str, Any], run: Callable[..., dict[str, Any]]
) -> dict[str, Any]:
    """verl-serial's turn for one pipeline: the cluster to itself. Its best configuration is
    searched, as the simulator does for every baseline: the width it asked for, and every
    device of the cluster (more data-parallel workers; on a CPU that need not be faster)."""
    asked = parse_pipeline_spec(spec).resources
    widths, tp = [asked.num_gpus], asked.tp
    whole = cluster.num_devices // tp * tp
    if whole > widths[0]:
        widths.append(whole)
    runs = []
    for width in widths:
        resized = {**spec, "resources": {**dict(spec.get("resources", {})), "num_gpus": width}}
        figures = run(cluster, "dedicated", {pid: resized}, label=f"serial/{width}")
        figures["pipelines"][pid]["serial_width"] = width
        runs.append(figures)
    return min(runs, key=lambda r: r["makespan_s"])


def _run(
    cluster: ClusterSpec,
    policy: str,
    specs: Mapping[str, Mapping[str, Any]],
    *,
    make_executor: ExecutorFactory,
    progress: Progress | None,
    label: str,
    graph: Callable[[str], GraphConfig],
    speed: MachineSpeed | None,
    rollout_engine: str | None = None,
) -> dict[str, Any]:
    profile = load_device_profile(cluster.device_type, rollout_engine)
    reference_s = profile.reference_s if speed is not None else None
    before_s = speed() if speed is not None and reference_s else 0.0
    cost = RooflineCostModel(profile)
    graph_config = graph(policy)
    executor = make_executor(specs, graph_config.train_minibatches, cluster)
    try:  # the executor holds processes and reserved devices: given back however the run ends
        runtime = RealRuntime(executor)
        controller = ClusterController(
            cluster,
            cost,
            runtime=runtime,
            scheduler=make_scheduler(policy, cluster, cost, real_pipelines=True),
            graph_config=graph_config,
        )
        totals = {pid: parse_pipeline_spec(spec).total_steps for pid, spec in specs.items()}
        done: dict[str, tuple[int, int]] = {pid: (0, totals[pid]) for pid in specs}
        started = time.monotonic()
        last = list(specs)[-1]
        for pid, spec in specs.items():
            controller.submit(pid, spec, schedule=pid == last)  # all arrive together
        cursor = 0
        while (t := controller.next_event_time()) is not None:
            controller.advance_to(t)
            for event in controller.events.since(cursor, 1000):
                cursor = event.seq
                if event.kind.value == "metrics":
                    done[event.pipeline_id] = (int(event.data["step"]), totals[event.pipeline_id])
            if progress is not None:
                progress(label, done)
        makespan_s = time.monotonic() - started
        per_pipeline = _real_metrics(executor)
        plans = _real_plans(executor)
    finally:
        shutdown = getattr(executor, "shutdown", None)
        if shutdown is not None:
            shutdown()
    # The machine's slowdown against the profile's moment: the mean of before and after, whose
    # spread says how steady the machine was (a forecast cannot be judged closer than that).
    after_s = speed() if speed is not None and reference_s else 0.0
    timed = slowdown_range(before_s, after_s, reference_s)
    slowdown = sum(timed) / 2
    failed = {pid: controller.state_of(pid).value for pid in specs if controller.state_of(pid).value != "succeeded"}
    if failed:
        raise RuntimeError(f"{label}: pipelines did not finish: {failed}")
    tokens = sum(sum(m["perf/total_num_tokens"] for m in steps) for steps in per_pipeline.values())
    pipelines = {}
    for pid, record in sorted(controller.finished_runs().items()):
        steps = per_pipeline[pid]
        produced = sum(m["perf/total_num_tokens"] for m in steps)  # the job's own count, not the model's
        pipelines[pid] = {
            **pipeline_figures(record, steps=len(steps), tokens=produced),
            "steps": len(steps),
            "tokens": int(produced),
            "score_mean_per_step": [round(m["critic/score/mean"], 4) for m in steps],
        }
        if steps and "rollout/policy_lag_max" in steps[0]:  # asynchronous: how stale each step's rollout was
            pipelines[pid]["policy_lag_per_step"] = [m["rollout/policy_lag_max"] for m in steps]
    forecast = partial(
        predict_with_simulator, cluster, policy, specs, plans, graph_config=graph_config, rollout_engine=rollout_engine
    )
    predicted = forecast(slowdown=slowdown)
    as_profiled = forecast() if slowdown != 1.0 else predicted
    real_stages = stage_seconds(controller.timeline)
    for pid, figures in pipelines.items():
        figures["predicted_step_latency_s"] = predicted["pipelines"][pid]
        figures["prediction_error"] = predicted["pipelines"][pid] / figures["step_latency_s"] - 1.0
        figures["prediction_error_at_profile_speed"] = as_profiled["pipelines"][pid] / figures["step_latency_s"] - 1.0
        figures["machine_slowdown"] = slowdown  # what its forecast was scaled by (serial: its own run's)
        figures["machine_slowdown_range"] = timed  # before and after, the lower first
        figures["stage_seconds"] = {"real": real_stages.get(pid, {}), "predicted": predicted["stages"].get(pid, {})}
    return {
        **policy_figures(tokens, makespan_s, pipelines),
        "machine_slowdown": slowdown,
        "machine_slowdown_range": timed,
        "tokens": int(tokens),
        "predicted_makespan_s": predicted["makespan_s"],
        "prediction_error": predicted["makespan_s"] / makespan_s - 1.0,
        "node_overhead_s_median": sorted(runtime.node_overheads_s)[len(runtime.node_overheads_s) // 2],
    }


def real_graph(policy: str, *, prefix_cache: bool, workers_share_process: bool) -> GraphConfig:
    """The graph a real run of ``policy`` is forecast with, for its rollout engine: whether a
    turn after a tool call prefills only the new tokens, and whether a job's workers are
    threads of one process (see :func:`run_real_workload`)."""
    base = real_graph_config_for(policy)
    return replace(base, prefix_cache=prefix_cache, workers_share_process=workers_share_process)


def predict_with_simulator(
    cluster: ClusterSpec,
    policy: str,
    specs: Mapping[str, Mapping[str, Any]],
    plans: Mapping[str, Mapping[int, list[SequencePlan]]],
    *,
    graph_config: GraphConfig,
    slowdown: float = 1.0,
    from_step: int = 0,
    rollout_engine: str | None = None,
) -> dict[str, Any]:
    """The simulator's forecast of the run just made: same controller, scheduler and cost
    profile (with its constants for ``rollout_engine``, the engine the rollouts ran on, where
    it holds them), replaying the sequences the real run produced (lengths, turns, tool
    waits), on the profile's machine ``slowdown`` times slower (:func:`slowed_down`).
    ``stages`` counts the steps from ``from_step`` on (a run whose first step was a warm-up
    leaves it out).

    The gap to the real run is the cost model's error for this machine and these models.
    """
    cost = RooflineCostModel(slowed_down(load_device_profile(cluster.device_type, rollout_engine), slowdown))
    parsed = {pid: parse_pipeline_spec(spec) for pid, spec in specs.items()}
    by_spec = {id(spec): pid for pid, spec in parsed.items()}

    def recorded(spec: PipelineSpec, step: int) -> list[SequencePlan]:
        return plans[by_spec[id(spec)]][step]

    controller = ClusterController(
        cluster,
        cost,
        scheduler=make_scheduler(policy, cluster, cost, real_pipelines=True),
        graph_config=graph_config,
        plans=recorded,
    )
    for pid, spec in parsed.items():
        controller.submit(pid, spec, schedule=False)
    makespan_s = controller.run_until_idle()
    latencies = {pid: record.step_period_s() for pid, record in controller.finished_runs().items()}
    counted = [span for span in controller.timeline if span.step >= from_step]
    return {"makespan_s": makespan_s, "pipelines": latencies, "stages": stage_seconds(counted)}


STAGE_GROUPS = {"prefill": "rollout", "decode": "rollout", "tool": "rollout"}
"""A real rollout prefills inside its decode nodes and waits for tools inside them too, so
only their sum compares with the simulator's."""


def stage_seconds(timeline: Sequence[TimelineSpan]) -> dict[str, dict[str, float]]:
    """Seconds each pipeline's sub-stages spent on the clock, summed by kind (rollout nodes
    together): where a forecast's error comes from. Concurrent workers' spans add up."""
    totals: dict[str, dict[str, float]] = {}
    for span in timeline:
        group = STAGE_GROUPS.get(span.kind, span.kind)
        by_kind = totals.setdefault(span.pipeline_id, {})
        by_kind[group] = by_kind.get(group, 0.0) + span.end_s - span.start_s
    return {pid: {kind: round(s, 4) for kind, s in by_kind.items()} for pid, by_kind in totals.items()}


def _real_plans(executor: NodeExecutor) -> dict[str, dict[int, list[SequencePlan]]]:
    getter = getattr(executor, "step_plans", None)
    if getter is not None:
        plans: dict[str, dict[int, list[SequencePlan]]] = getter()
        return plans
    pipelines = getattr(executor, "pipelines")  # noqa: B009 - ThreadExecutor keeps them here
    return {pid: dict(p.job.step_plans) for pid, p in pipelines.items()}


def _real_metrics(executor: NodeExecutor) -> dict[str, list[dict[str, float]]]:
    """Every pipeline's per-step metrics as its job measured them (real tokens, real scores)."""
    getter = getattr(executor, "step_metrics", None)
    if getter is not None:
        metrics: dict[str, list[dict[str, float]]] = getter()
        return metrics
    pipelines = getattr(executor, "pipelines")  # noqa: B009 - ThreadExecutor keeps them here
    return {pid: list(p.step_metrics) for pid, p in pipelines.items()}


def _merge_serial(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One pipeline after another: makespans add up, so do tokens."""
    makespan = sum(r["makespan_s"] for r in runs)
    tokens = sum(r["tokens"] for r in runs)
    pipelines: dict[str, Any] = {}
    offset = 0.0
    for r in runs:
        for pid, figures in r["pipelines"].items():
            pipelines[pid] = {**figures, "completion_s": (figures["completion_s"] or 0.0) + offset}
        offset += r["makespan_s"]
    predicted = sum(r["predicted_makespan_s"] for r in runs)
    overheads = sorted(r["node_overhead_s_median"] for r in runs)
    return {
        "machine_slowdown": sum(r["machine_slowdown"] * r["makespan_s"] for r in runs) / makespan,
        "machine_slowdown_range": [
            min(r["machine_slowdown_range"][0] for r in runs),
            max(r["machine_slowdown_range"][1] for r in runs),
        ],
        "node_overhead_s_median": overheads[len(overheads) // 2],
        **policy_figures(tokens, makespan, pipelines),
        "tokens": tokens,
        "predicted_makespan_s": predicted,
        "prediction_error": predicted / makespan - 1.0,
    }
