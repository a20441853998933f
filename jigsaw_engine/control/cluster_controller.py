"""``ClusterController``: every pipeline on the cluster, as sub-stage graphs, through a
:class:`~jigsaw_engine.sched.protocol.Scheduler` and a :class:`~jigsaw_engine.tasks.Runtime`.

It is driven from outside: ``run_until_idle`` on a virtual clock (benchmarks, tests), or
``advance_to(now_s)`` paced against wall time by :class:`~jigsaw_engine.control.local_engine.LocalEngine`.
After every event it admits queued pipelines, builds the graphs of steps that may start,
collects ready sub-stages, asks the scheduler and starts what it decides. Whatever the policy,
the readiness rule keeps these invariants:
- a sub-stage starts only after its predecessors in its step's graph;
- a worker's rollout of step ``s`` starts after its rollout of ``s - 1`` (with
  ``GraphConfig.overlap_rollouts``, once that is down to its tail and tool waits) and after the
  weight sync of step ``s - staleness - 1`` (sync pipelines: staleness 0);
- a pipeline's device work outside rollout (log-probs, training, sync) is sequential across
  steps: step ``s`` waits for the weight sync of ``s - 1``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jigsaw_engine.contracts import EventKind, PipelineState
from jigsaw_engine.control.event_log import EventLog
from jigsaw_engine.control.step_metrics import step_metrics
from jigsaw_engine.control.verl_estimate import FinishedStep, verl_comparison, verl_step_times
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.errors import DuplicatePipelineError, SpecError, UnknownPipelineError
from jigsaw_engine.graph.builder import GraphConfig, build_step_graph
from jigsaw_engine.graph.predict import GraphPredictor
from jigsaw_engine.graph.substage import SubStage, SubStageGraph, SubStageKind
from jigsaw_engine.sched.dedicated import DedicatedScheduler
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage, Resizer, Scheduler
from jigsaw_engine.sim.sim_runtime import SimRuntime
from jigsaw_engine.spec.cluster import ClusterSpec, check_fits_cluster
from jigsaw_engine.spec.pipeline import PipelineSpec, SyncMode, parse_pipeline_spec
from jigsaw_engine.tasks import Runtime, Task, TaskFinished
from jigsaw_engine.workload.lengths import sample_step
from jigsaw_engine.workload.plans import SequencePlan

logger = logging.getLogger(__name__)

MAX_WORKER_LOSSES = 3
"""A pipeline whose worker process died this many times is failed the next time, not handed
back again: a job that kills its worker (memory, say) must not be resumed forever."""

PlanSource = Callable[[PipelineSpec, int], list[SequencePlan]]
StepReportSource = Callable[[str, int], tuple[dict[str, float], list[dict[str, Any]]] | None]
"""(pipeline id, 0-based step) -> what real work measured in that step: metrics, samples."""

PRUNES_PER_RETENTION = 16
"""With a retention, pruning runs at most every ``retain_ended_s / PRUNES_PER_RETENTION`` engine
seconds: what is kept stays under ``1 + 1/16`` of the retention, at one short pass per interval."""
KEPT_DECISION_LATENCIES = 10_000
"""With a retention, the scheduler's most recent decision latencies kept (benchmarks keep all)."""


@dataclass(frozen=True, slots=True)
class TimelineSpan:
    """What ran where and when: the data behind the cluster timeline picture."""

    pipeline_id: str
    kind: str
    bucket: str | None
    step: int
    worker: int | None
    devices: tuple[int, ...]
    start_s: float
    end_s: float
    share: float


@dataclass(slots=True)
class _Run:
    spec: PipelineSpec
    state: PipelineState = PipelineState.QUEUED
    graphs: dict[int, SubStageGraph] = field(default_factory=dict)
    plans: dict[int, list[SequencePlan]] = field(default_factory=dict)
    predictor: GraphPredictor = field(default_factory=GraphPredictor)
    """Durations predicted from the steps this pipeline has finished (for roll-forward)."""
    step_specs: dict[int, PipelineSpec] = field(default_factory=dict)
    """The spec each open step was built with (a resizing scheduler changes its resources)."""
    done: set[tuple[int, str]] = field(default_factory=set)
    started: set[tuple[int, str]] = field(default_factory=set)
    frontier: set[tuple[int, str]] = field(default_factory=set)
    """Not started, every predecessor in its own graph done: the only candidates for ready."""
    step_spans: dict[int, list[TimelineSpan]] = field(default_factory=dict)
    steps_done: int = 0
    step_latencies_s: list[float] = field(default_factory=list)
    prediction_errors: list[float] = field(default_factory=list)
    """Per finished step, the worst relative error of the durations predicted for it (roll-forward
    schedulers only)."""
    tokens: int = 0
    unbilled_device_s: float = 0.0
    """Device-seconds (weighted by share) used since the last event that reported usage."""
    pause_requested: bool = False
    order: int = 0
    """Submission number: the loop visits pipelines in this order."""
    started_s: float | None = None
    ended_s: float | None = None

    @property
    def lag(self) -> int:
        return self.spec.staleness if self.spec.mode is SyncMode.ASYNC else 0


def _tail_or_tool(node: SubStage) -> bool:
    return node.kind is SubStageKind.TOOL or (node.kind is SubStageKind.DECODE and node.bucket == "tail")


class _OnDemand(Mapping[str, float]):
    """A mapping whose values are computed on first read: ``ClusterView.rollout_done_s`` costs a
    roll-forward per pipeline, and a scheduler reads it for the few pipelines it considers
    lending devices of, not at every event for all of them. Read only while the view is current
    (during the scheduler call it was passed to)."""

    def __init__(self, keys: list[str], compute: Callable[[str], float | None]) -> None:
        self._keys = keys
        self._known = set(keys)
        self._compute = compute
        self._values: dict[str, float | None] = {}
        """What each key read so far came to (None: no value)."""

    def _value(self, key: str) -> float | None:
        if key not in self._values:
            self._values[key] = self._compute(key) if key in self._known else None
        return self._values[key]

    def __getitem__(self, key: str) -> float:
        value = self._value(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._value(key) is not None

    def __iter__(self) -> Iterator[str]:
        return (key for key in self._keys if self._value(key) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _drop_ended_before(items: list[TimelineSpan] | list[FinishedStep], cutoff_s: float) -> None:
    """``items`` are in order of their end, near enough: a real runtime reports finishes a poll
    late. The first recent one stops the pass; an older one behind it waits for the next."""
    n = 0
    while n < len(items) and items[n].end_s < cutoff_s:
        n += 1
    del items[:n]


class ClusterController:
    def __init__(
        self,
        cluster: ClusterSpec,
        cost: RooflineCostModel,
        *,
        runtime: Runtime | None = None,
        scheduler: Scheduler | None = None,
        graph_config: GraphConfig | None = None,
        plans: PlanSource = sample_step,
        step_reports: StepReportSource | None = None,
        estimate_verl: bool = False,
        retain_ended_s: float | None = None,
    ) -> None:
        """``estimate_verl``: re-cost every finished step as verl would run it, for the
        timeline's comparison (two more graph builds a step: the service, not benchmarks).

        ``retain_ended_s``: for an engine that runs for ever (the service), how many engine
        seconds the past is kept. Timeline spans and finished steps that ended longer ago are
        dropped, so are events the reader has stored, and a run that ended (succeeded, failed,
        cancelled) longer ago is forgotten, but only once the reader has stored its last event:
        whoever submitted it must know it ended before the engine stops knowing it.
        Queued, running and paused runs are never forgotten. None (simulate, bench, run) keeps
        everything."""
        if retain_ended_s is not None and not retain_ended_s >= 0:
            raise ValueError(f"retain_ended_s must be >= 0, got {retain_ended_s}")
        self.cluster, self.cost = cluster, cost
        self._estimate_verl = estimate_verl
        self.runtime: Runtime = runtime or SimRuntime(cluster.num_devices)
        self.scheduler: Scheduler = scheduler or DedicatedScheduler()
        # Roll-forward predictions cost a pass over the open graphs at every event: only for
        # schedulers that read them (ClusterView.rollout_done_s, ReadyStage.chain_s).
        self._predict = bool(getattr(self.scheduler, "uses_predictions", False))
        self.graph_config = graph_config or GraphConfig()
        self._plans = plans
        self._step_reports = step_reports
        self.events = EventLog()
        self.timeline: list[TimelineSpan] = []
        self.finished_steps: list[FinishedStep] = []
        """Every finished step in order of its end, with its verl estimate (the cluster page)."""
        self.decision_latencies_s: list[float] = []
        self._queued: list[str] = []
        self._runs: dict[str, _Run] = {}
        self._submitted = 0
        self._active_ids: set[str] = set()
        """Pipelines starting or running: the loop reads them at every event, and ``_runs`` also
        holds every ended run of the retention window."""
        self._running: dict[str, Task] = {}
        self._started_s: dict[str, float] = {}
        self._worker_losses: dict[str, int] = {}
        """Per pipeline id, how often its worker died under it (kept when it is handed back)."""
        self._retain_ended_s = retain_ended_s
        self._next_prune_s = 0.0
        self._ended: deque[tuple[float, int, str]] = deque()
        """With a retention: (ended at, seq of its last event, id) of ended runs, oldest first."""
        self._forgotten_by_state: dict[str, int] = {}
        """Runs forgotten, by final state: ``describe`` still counts them."""

    # -- inputs ------------------------------------------------------------------------
    def submit(self, pipeline_id: str, spec: PipelineSpec | Mapping[str, Any], *, schedule: bool = True) -> None:
        """Queue a pipeline; raises ``SpecError`` if it cannot run on this cluster. With
        ``schedule=False`` nothing starts until the next event or ``run_until_idle`` (a batch
        of pipelines arriving together)."""
        if pipeline_id in self._runs:
            raise DuplicatePipelineError(pipeline_id)
        parsed = spec if isinstance(spec, PipelineSpec) else parse_pipeline_spec(spec)
        problems = check_fits_cluster(parsed, self.cluster)
        if problems:
            raise SpecError(problems)
        self._submitted += 1
        self._runs[pipeline_id] = _Run(parsed, steps_done=parsed.start_step, order=self._submitted)
        self._queued.append(pipeline_id)
        self._status(pipeline_id, PipelineState.QUEUED, "waiting for devices")
        if schedule:
            self._schedule()

    def cancel(self, pipeline_id: str) -> bool:
        run = self._runs.get(pipeline_id)
        if run is None:
            raise UnknownPipelineError(pipeline_id)
        if run.state.is_terminal:
            return False
        if pipeline_id in self._queued:
            self._queued.remove(pipeline_id)
        self._abort(pipeline_id)
        self._end(pipeline_id, run, PipelineState.CANCELLED, "cancelled by request")
        self._schedule()
        return True

    def pause(self, pipeline_id: str) -> bool:
        """Stop at the next step boundary: the last finished step is the checkpoint, and work of
        later steps already under way is dropped (it is redone on resume)."""
        run = self._runs.get(pipeline_id)
        if run is None:
            raise UnknownPipelineError(pipeline_id)
        if run.state.is_terminal or run.state is PipelineState.PAUSED:
            return False
        if pipeline_id in self._queued:
            self._queued.remove(pipeline_id)
            self._pause_now(pipeline_id, run)
        else:
            run.pause_requested = True
        return True

    def resume(self, pipeline_id: str) -> bool:
        """Queue a paused pipeline again; it continues after its last finished step."""
        run = self._runs.get(pipeline_id)
        if run is None:
            raise UnknownPipelineError(pipeline_id)
        if run.state is not PipelineState.PAUSED:
            return False
        run.pause_requested = False
        self._queued.append(pipeline_id)
        self._status(pipeline_id, PipelineState.QUEUED, f"resuming after step {run.steps_done}")
        self._schedule()
        return True

    # -- clock -------------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        return self.runtime.now_s

    def next_event_time(self) -> float | None:
        return self.runtime.next_event_s()

    def advance_to(self, now_s: float) -> None:
        """Process every finish due by ``now_s`` in order, scheduling after each."""
        while (t := self.runtime.next_event_s()) is not None and t <= now_s:
            for finished in self.runtime.advance_to(t):
                self._on_finished(finished)
            self._schedule()
        # A simulated runtime has nothing left due by now_s; a real one may have finished work
        # while we waited, and that must not be dropped.
        late = self.runtime.advance_to(now_s)
        for finished in late:
            self._on_finished(finished)
        if late:
            self._schedule()
        if self._retain_ended_s is not None and self.runtime.now_s >= self._next_prune_s:
            self._prune(self._retain_ended_s)

    def run_until_idle(self) -> float:
        self._schedule()
        while (t := self.runtime.next_event_s()) is not None:
            self.advance_to(t)
        return self.runtime.now_s

    # -- reads -------------------------------------------------------------------------
    def knows(self, pipeline_id: str) -> bool:
        return pipeline_id in self._runs

    def state_of(self, pipeline_id: str) -> PipelineState:
        return self._runs[pipeline_id].state

    def timeline_window(self, window_s: float) -> dict[str, Any]:
        """What ran in the last ``window_s`` seconds of the engine's clock, and what runs now
        (open spans end at ``now_s``): the cluster page's sub-stage timeline."""
        now = self.runtime.now_s
        since = now - window_s

        def as_dict(span: TimelineSpan, running: bool) -> dict[str, Any]:
            return {
                "pipeline_id": span.pipeline_id,
                "kind": span.kind,
                "bucket": span.bucket,
                "step": span.step + 1,
                "worker": span.worker,
                "devices": list(span.devices),
                "start_s": span.start_s,
                "end_s": span.end_s,
                "share": span.share,
                "running": running,
            }

        spans = []
        for span in reversed(self.timeline):  # newest last: stop at the window's start
            if span.end_s < since:
                break
            spans.append(as_dict(span, False))
        spans.reverse()
        for task_id, task in self._running.items():
            node = task.node
            open_span = TimelineSpan(task.pipeline_id, node.kind.value, node.bucket, node.step, node.worker,
                                     task.devices, self._started_s[task_id], now, task.share)  # fmt: skip
            spans.append(as_dict(open_span, True))
        steps = []
        for step in reversed(self.finished_steps):
            if step.end_s < since:
                break
            steps.append(step)
        steps.reverse()
        return {
            "now_s": now,
            "since_s": since,
            "device_type": self.cluster.device_type,
            "num_devices": self.cluster.num_devices,
            "peak_flops": self.cost.device.peak_flops_bf16,
            "spans": spans,
            "steps": [s.as_dict() for s in steps],
            "verl_estimate": verl_comparison(steps, self.cluster.num_devices),
        }

    def pipeline_states(self) -> dict[str, str]:
        return {pid: run.state.value for pid, run in self._runs.items()}

    def finished_runs(self) -> dict[str, _Run]:
        return {pid: r for pid, r in self._runs.items() if r.state is PipelineState.SUCCEEDED}

    def describe(self) -> dict[str, Any]:
        """``pipelines``: how many this engine has had in each state, forgotten ones included."""
        by_state = dict(self._forgotten_by_state)
        for run in self._runs.values():
            by_state[run.state.value] = by_state.get(run.state.value, 0) + 1
        return {
            "cluster": {
                "device_type": self.cluster.device_type,
                "num_devices": self.cluster.num_devices,
                "devices_in_use": len(self.runtime.device_load()),
            },
            "scheduler": self.scheduler.name,
            "pipelines": by_state,
            "clock_s": self.runtime.now_s,
        }

    # -- the loop ----------------------------------------------------------------------
    def _active(self) -> dict[str, _Run]:
        """Starting and running pipelines, in the order they were submitted (as in ``_runs``)."""
        runs = self._runs
        return {pid: runs[pid] for pid in sorted(self._active_ids, key=lambda pid: runs[pid].order)}

    def _schedule(self) -> None:
        specs = {pid: self._runs[pid].spec for pid in self._queued}
        for pid in self.scheduler.admit(self._view(), specs) if specs else ():
            self._queued.remove(pid)
            run = self._runs[pid]
            run.started_s = self.runtime.now_s
            self._status(pid, PipelineState.STARTING, f"placed on {run.spec.resources.num_gpus} devices")
        for pid, run in self._active().items():
            self._open_steps(pid, run)
        view = self._view()
        if not view.ready:
            return
        started = time.perf_counter()
        tasks = self.scheduler.decide(view)
        self.decision_latencies_s.append(time.perf_counter() - started)
        for task in tasks:
            self.runtime.start(task)
            self._running[task.task_id] = task
            self._started_s[task.task_id] = self.runtime.now_s
            run = self._runs[task.pipeline_id]
            run.started.add((task.node.step, task.node.node_id))
            run.frontier.discard((task.node.step, task.node.node_id))
            if run.state is PipelineState.STARTING and task.node.kind is not SubStageKind.LOAD:
                self._status(task.pipeline_id, PipelineState.RUNNING, "training")

    def _open_steps(self, pipeline_id: str, run: _Run) -> None:
        """Build graphs for the steps allowed to exist: up to ``lag`` ahead of the oldest open."""
        while (
            not run.pause_requested
            and len(run.graphs) <= run.lag
            and run.steps_done + len(run.graphs) < run.spec.total_steps
        ):
            step = run.steps_done + len(run.graphs)
            try:
                plans = self._plans(run.spec, step)
                spec = run.spec
                if isinstance(self.scheduler, Resizer):
                    resources = self.scheduler.resources_for_step(self._view(), pipeline_id, step)
                    spec = replace(run.spec, resources=resources)
                run.graphs[step] = build_step_graph(
                    self.cost, spec, plans, pipeline_id=pipeline_id, step=step, config=self.graph_config
                )
                run.step_specs[step] = spec
            except Exception as exc:  # one pipeline's failure must not stop the others
                logger.exception("pipeline %s failed building step %d", pipeline_id, step)
                self._abort(pipeline_id)
                self._end(pipeline_id, run, PipelineState.FAILED, f"system: {type(exc).__name__}: {exc}")
                return
            run.plans[step] = plans
            graph = run.graphs[step]
            run.frontier.update((step, n.node_id) for n in graph.nodes if not graph.predecessors(n.node_id))

    def _ready(self, run: _Run, node: SubStage) -> bool:
        """The rules across steps for a node of the frontier (see the module docstring)."""
        s = node.step
        if node.worker is not None:  # rollout: weights and the worker's previous rollout
            previous = run.graphs.get(s - 1)
            overlap = self.graph_config.overlap_rollouts and run.lag > 0
            if previous is not None and any(
                (s - 1, n.node_id) not in run.done and not (overlap and _tail_or_tool(n))
                for n in previous.of_worker(node.worker)
            ):
                return False
            return s - run.lag - 1 < run.steps_done
        return node.devices == 0 or node.kind is SubStageKind.LOAD or s == run.steps_done

    def _view(self) -> ClusterView:
        active = self._active()
        ready: list[ReadyStage] = []
        in_rollout: list[str] = []
        for pid, run in active.items():
            candidates = sorted(run.frontier, key=lambda k: (k[0], run.graphs[k[0]].position(k[1])))
            for step, node_id in candidates:
                graph = run.graphs[step]
                node = graph.node(node_id)
                if self._ready(run, node):
                    ready.append(ReadyStage(pid, node, self._chain_s(run, graph, node) if self._predict else 0.0))
            if self._predict and run.steps_done in run.graphs:
                in_rollout.append(pid)
        return ClusterView(
            now_s=self.runtime.now_s,
            num_devices=self.cluster.num_devices,
            device_load=self.runtime.device_load(),
            ready=tuple(ready),
            specs={pid: run.spec for pid, run in active.items()},
            queued=tuple(self._queued),
            progress={pid: (run.steps_done, run.spec.total_steps) for pid, run in active.items()},
            recent_step_s={
                pid: sum(run.step_latencies_s[-3:]) / len(run.step_latencies_s[-3:])
                for pid, run in active.items()
                if run.step_latencies_s
            },
            running=tuple(self._running.values()),
            rollout_done_s=_OnDemand(
                in_rollout, lambda pid: self._rollout_eta(pid, active[pid], active[pid].graphs[active[pid].steps_done])
            ),
        )

    @staticmethod
    def _predicted_s(run: _Run, node: SubStage) -> float:
        """What a scheduler may know of ``node``'s duration before it runs: the pipeline's recent
        steps (per role, :class:`GraphPredictor`). A role never observed (the first step, a new
        worker after a resize) falls back to the graph's estimate, which in the simulator is
        built from the sampled lengths themselves."""
        predicted = run.predictor.duration_of(node)
        return node.duration_s if predicted is None else predicted

    def _chain_s(self, run: _Run, graph: SubStageGraph, node: SubStage) -> float:
        chain = graph.of_worker(node.worker) if node.worker is not None else graph.pipeline_wide()
        rest = chain[chain.index(node) :]
        return sum(self._predicted_s(run, n) for n in rest if n.devices > 0)

    def _rollout_eta(self, pid: str, run: _Run, graph: SubStageGraph) -> float | None:
        """When the step's last rollout worker should finish, rolling its chain forward from
        what runs now on predicted durations; None once every worker is done."""
        now, latest = self.runtime.now_s, None
        workers = {n.worker for n in graph.nodes if n.worker is not None}
        for w in workers:
            t = now
            for n in graph.of_worker(w):
                key = (graph.step, n.node_id)
                if key in run.done or n.devices == 0:
                    continue
                task_id = f"{pid}/{n.node_id}"
                if task_id in self._started_s:
                    t = max(t, self._started_s[task_id] + self._running[task_id].setup_s + self._predicted_s(run, n))
                else:
                    t += self._predicted_s(run, n)
            if any((graph.step, n.node_id) not in run.done for n in graph.of_worker(w) if n.devices > 0):
                latest = t if latest is None else max(latest, t)
        return latest

    def _on_finished(self, finished: TaskFinished) -> None:
        task, node = finished.task, finished.task.node
        self._running.pop(task.task_id, None)
        self._started_s.pop(task.task_id, None)
        span = TimelineSpan(task.pipeline_id, node.kind.value, node.bucket, node.step, node.worker,
                            task.devices, finished.start_s, finished.end_s,
                            task.share if finished.mean_share is None else finished.mean_share)  # fmt: skip
        self.timeline.append(span)
        run = self._runs.get(task.pipeline_id)
        if run is None or run.state.is_terminal:  # handed back, or ended, meanwhile
            return
        run.unbilled_device_s += len(task.devices) * (finished.end_s - finished.start_s) * span.share
        if finished.lost and self._worker_losses.get(task.pipeline_id, 0) < MAX_WORKER_LOSSES:
            self._worker_losses[task.pipeline_id] = self._worker_losses.get(task.pipeline_id, 0) + 1
            self._hand_back(task.pipeline_id, f"{node.node_id}: {finished.error}")
            return
        if finished.error is not None:
            self._abort(task.pipeline_id)
            self._end(task.pipeline_id, run, PipelineState.FAILED, f"system: {node.node_id} failed: {finished.error}")
            return
        run.done.add((node.step, node.node_id))
        graph = run.graphs[node.step]
        for succ in graph.successors(node.node_id):
            if all((node.step, p) in run.done for p in graph.predecessors(succ)):
                run.frontier.add((node.step, succ))
        if node.kind is not SubStageKind.LOAD:
            run.step_spans.setdefault(node.step, []).append(span)
        if node.kind is SubStageKind.WEIGHT_SYNC:
            self._step_done(task.pipeline_id, run, node.step)

    def _step_done(self, pipeline_id: str, run: _Run, step: int) -> None:
        graph = run.graphs.pop(step)
        if self._predict:
            run.predictor.observe(graph)
            run.prediction_errors.append(max(run.predictor.last_errors.values(), default=0.0))
        run.done -= {(step, n.node_id) for n in graph.nodes}
        run.started -= {(step, n.node_id) for n in graph.nodes}
        run.frontier -= {(step, n.node_id) for n in graph.nodes}
        spans = run.step_spans.pop(step)
        plans = run.plans.pop(step)
        spec = run.step_specs.pop(step)
        metrics = step_metrics(spec, spans, plans, peak_flops=self.cost.device.peak_flops_bf16)
        run.steps_done += 1
        run.step_latencies_s.append(metrics["timing_s/step"])
        run.tokens += int(metrics["perf/total_num_tokens"])
        metrics["usage/device_seconds"] = run.unbilled_device_s
        run.unbilled_device_s = 0.0
        real = self._step_reports(pipeline_id, step) if self._step_reports is not None else None
        if real is not None:  # the real job's own measurements win over the model's
            metrics.update(real[0])
        # Real steps run on the wall clock: the cost model's verl time would not compare.
        estimate = self._estimate_verl and self._step_reports is None
        self._record_step(pipeline_id, run, step, spans, plans, int(metrics["perf/total_num_tokens"]), estimate)
        self.events.append(
            pipeline_id,
            EventKind.METRICS,
            self.runtime.now_s,
            {"step": run.steps_done, "total_steps": run.spec.total_steps, "metrics": metrics},
        )
        if real is not None and real[1]:
            self.events.append(
                pipeline_id, EventKind.SAMPLES, self.runtime.now_s, {"step": run.steps_done, "samples": real[1]}
            )
        if run.steps_done >= run.spec.total_steps:
            self._end(pipeline_id, run, PipelineState.SUCCEEDED, f"completed {run.steps_done} steps")
        elif run.pause_requested:
            self._abort(pipeline_id)
            self._pause_now(pipeline_id, run)

    def _record_step(
        self,
        pipeline_id: str,
        run: _Run,
        step: int,
        spans: list[TimelineSpan],
        plans: list[SequencePlan],
        tokens: int,
        estimate: bool,
    ) -> None:
        """Keep the finished step for the cluster page: its span of time, its work, and (when
        estimated) verl's time for the same sequences, from the same cost model."""
        dedicated = serial = float("nan")
        if estimate:
            try:
                dedicated, serial = verl_step_times(self.cost, self.cluster, run.spec, plans, step)
            except Exception:  # an estimate must never stop a pipeline
                logger.exception("pipeline %s: no verl estimate for step %d", pipeline_id, step)
        self.finished_steps.append(
            FinishedStep(
                pipeline_id=pipeline_id,
                step=step + 1,
                start_s=min(s.start_s for s in spans),
                end_s=max(s.end_s for s in spans),
                tokens=tokens,
                flops=6.0 * run.spec.model.num_params * tokens,
                verl_gpus=run.spec.resources.num_gpus,
                verl_dedicated_s=dedicated,
                verl_serial_s=serial,
            )
        )

    def _pause_now(self, pipeline_id: str, run: _Run) -> None:
        for open_state in (run.graphs, run.plans, run.step_specs, run.step_spans):
            open_state.clear()
        for node_set in (run.done, run.started, run.frontier):
            node_set.clear()
        self.scheduler.release(pipeline_id)
        self._status(pipeline_id, PipelineState.PAUSED, f"paused after step {run.steps_done} (its checkpoint)")

    def _abort(self, pipeline_id: str) -> None:
        for task in self.runtime.abort(pipeline_id):
            self._running.pop(task.task_id, None)
            self._started_s.pop(task.task_id, None)

    def _end(self, pipeline_id: str, run: _Run, state: PipelineState, reason: str) -> None:
        run.ended_s = self.runtime.now_s
        run.graphs.clear()
        run.step_specs.clear()
        run.frontier.clear()
        self.scheduler.release(pipeline_id)
        self.runtime.release(pipeline_id)
        self._status(pipeline_id, state, reason)
        if self._retain_ended_s is not None:
            self._ended.append((run.ended_s, self.events.last_seq, pipeline_id))

    # -- retention ---------------------------------------------------------------------
    def _prune(self, retain_s: float) -> None:
        """Drop what ended more than ``retain_s`` engine seconds ago. Each list is in order of
        its end, so every pass stops at the first item still due: the cost is what it drops."""
        now = self.runtime.now_s
        self._next_prune_s = now + retain_s / PRUNES_PER_RETENTION
        cutoff = now - retain_s
        _drop_ended_before(self.timeline, cutoff)
        _drop_ended_before(self.finished_steps, cutoff)
        read_through = self.events.read_through
        while self._ended and self._ended[0][0] < cutoff and self._ended[0][1] <= read_through:
            ended_s, _, pipeline_id = self._ended.popleft()
            run = self._runs.get(pipeline_id)
            if run is None or not run.state.is_terminal or run.ended_s != ended_s:
                continue  # not the run that ended then
            del self._runs[pipeline_id]
            self._worker_losses.pop(pipeline_id, None)
            self._forgotten_by_state[run.state.value] = self._forgotten_by_state.get(run.state.value, 0) + 1
        self.events.forget_read_before(cutoff)
        del self.decision_latencies_s[:-KEPT_DECISION_LATENCIES]

    def _hand_back(self, pipeline_id: str, cause: str) -> None:
        """A worker process died under the pipeline: its work is not at fault, so it is not
        failed. The engine forgets it, as an engine restart would, and whoever submitted it
        (the control plane's reconciler) submits it again from its latest checkpoint."""
        self._abort(pipeline_id)
        self.scheduler.release(pipeline_id)
        self.runtime.release(pipeline_id)
        self.events.append(
            pipeline_id,
            EventKind.LOG,
            self.runtime.now_s,
            {"level": "warning", "message": f"worker lost ({cause}); the job resumes from its latest checkpoint"},
        )
        del self._runs[pipeline_id]
        self._active_ids.discard(pipeline_id)

    def _status(self, pipeline_id: str, state: PipelineState, reason: str) -> None:
        run = self._runs[pipeline_id]
        run.state = state
        if state in (PipelineState.STARTING, PipelineState.RUNNING):
            self._active_ids.add(pipeline_id)
        else:
            self._active_ids.discard(pipeline_id)
        logger.info("pipeline %s -> %s (%s)", pipeline_id, state.value, reason)
        data: dict[str, Any] = {
            "status": state.value,
            "reason": reason,
            "step": run.steps_done,
            "total_steps": run.spec.total_steps,
        }
        if run.unbilled_device_s > 0:
            data["device_seconds"] = run.unbilled_device_s
            run.unbilled_device_s = 0.0
        self.events.append(pipeline_id, EventKind.STATUS, self.runtime.now_s, data)
