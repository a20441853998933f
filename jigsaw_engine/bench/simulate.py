"""Running a workload under several policies on the simulator and reporting figures.

Every policy runs the same controller, cost model, sampled rollouts and seeds; only the
scheduler (and, for ``verl-serial``, the pipelines' device counts) differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from jigsaw_engine.bench.compare import compare_policies, pipeline_figures, policy_figures
from jigsaw_engine.bench.muxserve_plan import plan_muxserve
from jigsaw_engine.bench.rollmux_plan import plan_rollmux
from jigsaw_engine.bench.steady_window import steady_throughput
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.run_record import RunRecord
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.cost.lower_bound import LowerBound, chain_s, lower_bound
from jigsaw_engine.errors import JigsawError
from jigsaw_engine.graph.builder import GraphConfig
from jigsaw_engine.sched.dedicated import DedicatedScheduler
from jigsaw_engine.sched.jigsaw import JIGSAW_GRAPH, JigsawOptions, JigsawScheduler, jigsaw_resources
from jigsaw_engine.sched.protocol import Scheduler
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec, SyncMode, parse_pipeline_spec
from jigsaw_engine.spec.workload_file import WorkloadFile
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.traces import TraceError, load_trace_file

Transform = Callable[[PipelineSpec, ClusterSpec], PipelineSpec]


def _finished_run(controller: ClusterController, pid: str, name: str) -> RunRecord:
    """A pipeline's run that must have finished: one that did not is named, with its state."""
    run = controller.finished_runs().get(pid)
    if run is None:
        state = controller.pipeline_states().get(pid, "gone")
        raise JigsawError(f"pipeline {name!r} did not finish running alone ({state}); the log above says why")
    return run


def _as_is(spec: PipelineSpec, cluster: ClusterSpec) -> PipelineSpec:
    return spec


def _synchronous(spec: PipelineSpec, cluster: ClusterSpec) -> PipelineSpec:
    """verl trains synchronously: every step's rollout uses the latest weights."""
    return replace(spec, mode=SyncMode.SYNC, staleness=0)


def _whole_cluster(spec: PipelineSpec, cluster: ClusterSpec) -> PipelineSpec:
    """verl's other deployment: each pipeline in turn gets every device (data parallel)."""
    tp = spec.resources.tp
    return replace(spec, resources=ResourceSpec(num_gpus=cluster.num_devices // tp * tp, tp=tp))


STREAMRL_GRAPH = GraphConfig(dispatch="longest_first")
AREAL_GRAPH = GraphConfig(dispatch="longest_first", overlap_rollouts=True, interrupt_reprefill=True)
AREAL_TAIL_SHARE = 0.3
"""AReaL's continuous batching: a worker's tail decode holds this share of its devices while
the next step's generation takes the rest (memory-bound tails need few SMs)."""
SEARCH_STEPS = 3
"""Steps each candidate configuration of a baseline's knob search is simulated for."""


def _areal_scheduler() -> Scheduler:
    return DedicatedScheduler(tail_share=AREAL_TAIL_SHARE)


@lru_cache(maxsize=4096)
def _alone_throughput(
    spec: PipelineSpec, cluster: ClusterSpec, graph_config: GraphConfig, make_scheduler: Callable[[], Scheduler]
) -> float:
    """Tokens a second of ``spec`` alone on its layout. Memoised (a simulation is a function of
    its arguments): Jigsaw's split search asks what StreamRL's asks of a pipeline with
    staleness 1, and every Jigsaw variant of a comparison asks it again."""
    steps = min(SEARCH_STEPS + spec.staleness, spec.total_steps)  # async: long enough to reach steady state
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    controller = ClusterController(cluster, cost, scheduler=make_scheduler(), graph_config=graph_config)
    controller.submit("search", replace(spec, total_steps=steps))
    makespan = controller.run_until_idle()
    return _finished_run(controller, "search", spec.name).tokens / makespan


def _best_pool_split(
    spec: PipelineSpec, cluster: ClusterSpec, graph: GraphConfig, make_scheduler: Callable[[], Scheduler]
) -> PipelineSpec:
    """The pipeline's best layout: colocated, or every split into rollout and training pools."""
    res = spec.resources
    candidates = [spec] + [
        replace(spec, resources=replace(res, rollout_gpus=r)) for r in range(res.tp, res.num_gpus, res.tp)
    ]
    return max(candidates, key=lambda c: _alone_throughput(c, cluster, graph, make_scheduler))


def _streamrl_lag(spec: PipelineSpec, cluster: ClusterSpec) -> PipelineSpec:
    """StreamRL's one-step lag on an async pipeline, before its pool split is searched."""
    return replace(spec, staleness=min(spec.staleness, 1)) if spec.mode is SyncMode.ASYNC else spec


def _streamrl(spec: PipelineSpec, cluster: ClusterSpec) -> PipelineSpec:
    """StreamRL: asynchronous with staleness 1 on disaggregated rollout and training pools,
    length-aware dispatch; the pool split is searched per pipeline (colocated included, so
    the baseline is never worse than its own best layout). Sync pipelines keep verl's layout:
    StreamRL's overlap needs the one-step lag."""
    if spec.mode is not SyncMode.ASYNC:
        return spec
    return _best_pool_split(_streamrl_lag(spec, cluster), cluster, STREAMRL_GRAPH, DedicatedScheduler)


def _areal_lag(spec: PipelineSpec, cluster: ClusterSpec) -> PipelineSpec:
    """AReaL's staleness bound (the pipeline's, at most 4), before its pool split is searched."""
    return replace(spec, staleness=min(spec.staleness, 4)) if spec.mode is SyncMode.ASYNC else spec


def _areal(spec: PipelineSpec, cluster: ClusterSpec) -> PipelineSpec:
    """AReaL: fully asynchronous with the pipeline's staleness bound, at most 4; interruptible
    rollouts (each weight update re-prefills what is in flight) and continuous generation
    across steps; the pool split searched per pipeline as for StreamRL. Sync pipelines keep
    verl's layout: their next rollout needs this step's weights."""
    if spec.mode is not SyncMode.ASYNC:
        return spec
    return _best_pool_split(_areal_lag(spec, cluster), cluster, AREAL_GRAPH, _areal_scheduler)


def _serially(transform: Transform) -> Transform:
    """``transform`` applied to the pipeline given the whole cluster (verl's other deployment)."""
    return lambda spec, cluster: transform(_whole_cluster(spec, cluster), cluster)


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    make_scheduler: Callable[[], Scheduler]
    transform: Transform = _as_is
    graph_config: GraphConfig = field(default_factory=GraphConfig)
    plan: Callable[[ClusterSpec, dict[str, PipelineSpec]], tuple[dict[str, PipelineSpec], Scheduler]] | None = None
    """For policies whose layout spans jobs (RollMux's groups): specs and scheduler at once."""
    serial_bound: Transform | None = None
    """For a deployment that runs the pipelines one after another on the whole cluster: each
    pipeline's spec before its layout search (every layout the search may choose shares what
    :func:`serial_throughput_bound` reads of it)."""


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("verl-dedicated", DedicatedScheduler, _synchronous),
        Policy("verl-serial", DedicatedScheduler, _serially(_synchronous), serial_bound=_serially(_synchronous)),
        Policy("streamrl-dedicated", DedicatedScheduler, _streamrl, STREAMRL_GRAPH),
        Policy(
            "streamrl-serial",
            DedicatedScheduler,
            _serially(_streamrl),
            STREAMRL_GRAPH,
            serial_bound=_serially(_streamrl_lag),
        ),
        Policy("areal-dedicated", _areal_scheduler, _areal, AREAL_GRAPH),
        Policy("areal-serial", _areal_scheduler, _serially(_areal), AREAL_GRAPH, serial_bound=_serially(_areal_lag)),
        Policy("rollmux", DedicatedScheduler, plan=plan_rollmux),
        Policy("muxserve", DedicatedScheduler, plan=plan_muxserve),
    )
}


def _jigsaw_plan(
    name: str, options: JigsawOptions
) -> Callable[[ClusterSpec, dict[str, PipelineSpec]], tuple[dict[str, PipelineSpec], Scheduler]]:
    def plan(cluster: ClusterSpec, specs: dict[str, PipelineSpec]) -> tuple[dict[str, PipelineSpec], Scheduler]:
        cost = RooflineCostModel(load_device_profile(cluster.device_type))

        def split(s: PipelineSpec) -> PipelineSpec:
            return _best_pool_split(s, cluster, STREAMRL_GRAPH, DedicatedScheduler)

        applied = {pid: jigsaw_resources(s, split) for pid, s in specs.items()}
        return applied, JigsawScheduler(cluster, cost, options, name)

    return plan


JIGSAW_POLICIES = {
    "jigsaw": JigsawOptions(),
    "greedy": JigsawOptions(lookahead=False),
    "jigsaw-with-split": JigsawOptions(colocate=True),
    "jigsaw-no-resize": JigsawOptions(resize=False),
    "jigsaw-rollout-only": JigsawOptions(rollout_only=True),
    "jigsaw-no-turns": JigsawOptions(take_turns=False),
}
POLICIES.update(
    {
        name: Policy(name, DedicatedScheduler, graph_config=JIGSAW_GRAPH, plan=_jigsaw_plan(name, options))
        for name, options in JIGSAW_POLICIES.items()
    }
)
POLICIES["jigsaw-no-migration"] = Policy(
    "jigsaw-no-migration",
    DedicatedScheduler,
    graph_config=replace(JIGSAW_GRAPH, migrate_tails=False),
    plan=_jigsaw_plan("jigsaw-no-migration", JigsawOptions()),
)
POLICIES["jigsaw-no-early-logprobs"] = Policy(
    "jigsaw-no-early-logprobs",
    DedicatedScheduler,
    graph_config=replace(JIGSAW_GRAPH, early_logprobs=False),
    plan=_jigsaw_plan("jigsaw-no-early-logprobs", JigsawOptions()),
)
COMPOSITE = {
    "verl": ("verl-dedicated", "verl-serial"),
    "streamrl": ("streamrl-dedicated", "streamrl-serial"),
    "areal": ("areal-dedicated", "areal-serial"),
}
"""A composite reports its best member: a single-job system deployed the better of two ways
on a shared cluster (a partition per job, or jobs one after another on all of it)."""
AVAILABLE = tuple(POLICIES) + tuple(COMPOSITE)


@dataclass(slots=True)
class PolicyRun:
    controller: ClusterController
    makespan_s: float
    specs: dict[str, PipelineSpec]
    names: dict[str, str]


def prepare(workload: WorkloadFile, *, steps: int | None, seed: int) -> dict[str, PipelineSpec]:
    """The workload's pipelines with the run's seed and step count applied (same for all policies)."""
    specs: dict[str, PipelineSpec] = {}
    for i, raw in enumerate(workload.pipelines):
        spec = parse_pipeline_spec(raw)
        _check_trace(spec)
        spec = replace(spec, seed=seed * 1000 + spec.seed, total_steps=steps or spec.total_steps)
        specs[f"p{i}"] = spec
    return specs


def _check_trace(spec: PipelineSpec) -> None:
    """Load a replayed trace before any run: a missing one stops the workload here, with the
    pipeline named, rather than failing the pipeline inside each policy's run."""
    if spec.workload.trace is None:
        return
    try:
        load_trace_file(spec.workload.trace)
    except TraceError as exc:
        raise TraceError(f"pipeline {spec.name!r} (workload {spec.workload.name}): {exc}") from None


def run_policy(policy: Policy, cluster: ClusterSpec, specs: dict[str, PipelineSpec]) -> PolicyRun:
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    if policy.plan is not None:
        applied, scheduler = policy.plan(cluster, specs)
    else:
        applied, scheduler = {pid: policy.transform(s, cluster) for pid, s in specs.items()}, policy.make_scheduler()
    controller = ClusterController(cluster, cost, scheduler=scheduler, graph_config=policy.graph_config)
    for pid, spec in applied.items():
        controller.submit(pid, spec, schedule=False)  # all arrive together
    makespan = controller.run_until_idle()
    return PolicyRun(controller, makespan, applied, {pid: s.name for pid, s in specs.items()})


def summarize(run: PolicyRun, cluster: ClusterSpec, *, timing: bool) -> dict[str, Any]:
    """The run's figures (:func:`~jigsaw_engine.bench.compare.policy_figures`) and the
    simulator's own: effective MFU, where device time went, decision latencies, and the
    throughput in the steady window while every pipeline runs (None where pipelines run one
    after another)."""
    c = run.controller
    device = load_device_profile(cluster.device_type)
    tokens = sum(r.tokens for r in c.finished_runs().values())
    flops = sum(6.0 * run.specs[pid].model.num_params * r.tokens for pid, r in c.finished_runs().items())
    busy: dict[str, float] = {}
    for span in c.timeline:
        busy[span.kind] = busy.get(span.kind, 0.0) + (span.end_s - span.start_s) * len(span.devices) * span.share
    busy["idle"] = cluster.num_devices * run.makespan_s - sum(busy.values())
    pipelines = {}
    for pid, r in sorted(c.finished_runs().items()):
        pipelines[run.names[pid]] = {
            **pipeline_figures(r, steps=r.steps_done, tokens=r.tokens),
            "num_gpus": run.specs[pid].resources.num_gpus,
            "rollout_gpus": run.specs[pid].resources.rollout_gpus,
        }
    out = policy_figures(tokens, run.makespan_s, pipelines)
    steady = steady_throughput(c.finished_runs(), c.finished_steps)
    out["steady_throughput_tokens_per_s"] = steady["tokens_per_s"] if steady else None
    out["steady_window_s"] = steady["window_s"] if steady else None
    out["effective_mfu"] = flops / (cluster.num_devices * device.peak_flops_bf16 * run.makespan_s)
    out["gpu_time_breakdown"] = {k: busy[k] / (cluster.num_devices * run.makespan_s) for k in sorted(busy)}
    if timing:
        lat = sorted(c.decision_latencies_s) or [0.0]
        out["decision_latency_ms"] = {
            "p50": 1000 * lat[len(lat) // 2],
            "p99": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
            "count": len(c.decision_latencies_s),
        }
    return out


def workload_lower_bound(cluster: ClusterSpec, specs: dict[str, PipelineSpec]) -> LowerBound:
    """The bound every policy is measured against. Each pipeline may train on the whole
    cluster (the largest allowed GPU count), so the bound holds for verl-serial too."""
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    pipelines = [
        (_whole_cluster(spec, cluster), [sample_step(spec, s) for s in range(spec.total_steps)])
        for spec in specs.values()
    ]
    return lower_bound(cost, pipelines, cluster.num_devices)


BOUND_SLACK = 1e-9
"""Relative margin on a proven bound before it rules a run out: float rounding, never reached."""


def serial_throughput_bound(
    policy: Policy, cluster: ClusterSpec, specs: dict[str, PipelineSpec], bound: LowerBound | None = None
) -> float:
    """No throughput ``policy`` (a serial deployment: :attr:`Policy.serial_bound` set) can
    reach on ``specs``, whichever layouts its search picks. ``bound``: the workload's
    :func:`workload_lower_bound`, if already at hand (its per-step paths are reused).

    Why it holds: each pipeline asks for the whole cluster (``tp`` times ``N // tp`` devices,
    more than half of ``N``), so the dedicated scheduler admits one only once the one before
    it has ended; the makespan is the sum of the pipelines' runs alone, each one no shorter
    than its critical path (:func:`~jigsaw_engine.cost.lower_bound.chain_s`: each step's
    slowest sequence decoded alone, training on all the pipeline's devices, the weight sync,
    steps ordered by the staleness bound; a sub-stage never runs faster than alone on whole
    devices, whatever it shares them with). The path reads the spec's model, ``tp``, device
    count and algorithm, which every layout of the search shares (never the rollout/training
    split), and the policy's staleness. The bound's work term is left out: AReaL's tail decode
    and the next step's generation on one device do more than a device-second of work a
    second (``cost.interference``). The trained tokens are those of the sampled steps, the
    same under every layout."""
    if policy.serial_bound is None:
        raise ValueError(f"{policy.name} is not a serial deployment")
    bound = bound or workload_lower_bound(cluster, specs)
    makespan_s, tokens = 0.0, 0
    for spec, pipeline in zip(specs.values(), bound.pipelines, strict=True):
        member, whole = policy.serial_bound(spec, cluster), _whole_cluster(spec, cluster)
        if replace(member, mode=whole.mode, staleness=whole.staleness) != whole:
            raise ValueError(f"{policy.name}: the bound's paths were drawn for another layout of {spec.name!r}")
        makespan_s += chain_s(pipeline.steps, member.staleness)
        tokens += sum(p.total_tokens for s in range(spec.total_steps) for p in sample_step(spec, s))
    return tokens / makespan_s if makespan_s > 0 else float("inf")


def alone_latencies(cluster: ClusterSpec, specs: dict[str, PipelineSpec]) -> dict[str, float]:
    """Each pipeline's time per step running alone, as submitted (sync or async), on its own
    devices (its num_gpus)."""
    out: dict[str, float] = {}
    for pid, spec in specs.items():
        run = run_policy(Policy("alone", DedicatedScheduler), cluster, {pid: spec})
        out[pid] = _finished_run(run.controller, pid, spec.name).step_period_s()
    return out


def simulate_workload(
    workload: WorkloadFile,
    policies: list[str],
    *,
    steps: int | None,
    seed: int,
    timing: bool = True,
    exhaustive: bool = False,
    progress: Callable[[int, int, str], None] = lambda done, total, name: None,
    on_run: Callable[[str, PolicyRun], None] = lambda name, run: None,
) -> dict[str, Any]:
    """Every policy (composites: each member, reporting the best) on the same specs and seeds.
    A composite's serial member that was not asked for by name is skipped where its
    :func:`serial_throughput_bound` is below a member that ran (it cannot be the best; its
    search is what takes the time at scale); ``exhaustive`` runs it all the same.
    ``progress(done, total, name)`` is called before each policy runs (or is skipped) and
    once at the end; ``on_run`` receives each finished run (its controller holds the timeline)."""
    unknown = [p for p in policies if p not in AVAILABLE]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; available: {', '.join(AVAILABLE)}")
    cluster = workload.cluster
    specs = prepare(workload, steps=steps, seed=seed)
    alone = alone_latencies(cluster, specs)
    bound = workload_lower_bound(cluster, specs)

    def needless(name: str, results: Mapping[str, dict[str, Any]]) -> bool:
        # Strictly below a member that ran: the composite could not report it, tie or not.
        if exhaustive or name in policies or POLICIES[name].serial_bound is None:
            return False
        rivals: list[float] = [
            results[m]["throughput_tokens_per_s"]
            for composite, members in COMPOSITE.items()
            if composite in policies and name in members
            for m in members
            if m in results
        ]
        if not rivals:
            return False
        return serial_throughput_bound(POLICIES[name], cluster, specs, bound) * (1 + BOUND_SLACK) < max(rivals)

    def run_one(name: str) -> dict[str, Any]:
        run = run_policy(POLICIES[name], cluster, specs)
        on_run(name, run)
        figures = summarize(run, cluster, timing=timing)
        figures["lower_bound_ratio"] = bound.practical_s / figures["makespan_s"]
        return figures

    result = compare_policies(
        workload,
        policies,
        run_one,
        runs=sorted({m for p in policies for m in COMPOSITE.get(p, (p,))}),
        composites=COMPOSITE,
        # Keyed as the report names pipelines; where names repeat, as the report keeps them.
        alone={specs[pid].name: alone[pid] for pid in sorted(specs)},
        progress=progress,
        needless=needless,
    )
    return {
        **result,
        "steps": {specs[pid].name: specs[pid].total_steps for pid in specs},
        "seed": seed,
        "lower_bound": {"practical_s": bound.practical_s, "roofline_s": bound.roofline_s},
    }
