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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jigsaw_engine.contracts import EventKind, PipelineState
from jigsaw_engine.control.event_log import EventLog
from jigsaw_engine.control.roll_forward import OnDemand, chain_s, rollout_eta
from jigsaw_engine.control.run_record import ClusterHistory, RunRecord, TimelineSpan
from jigsaw_engine.control.step_metrics import reward_failure_log, split_before_train, step_metrics
from jigsaw_engine.control.verl_estimate import FinishedStep
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

NODE_LOSS_WINDOW_S = 60.0
"""A worker lost this close to a node's loss is the node's loss, not the job's, and does not
count towards ``MAX_WORKER_LOSSES``: a dead node's processes are unreachable within seconds,
but the runtime knows the node lost only later (Ray: after its health checks, about 15 s), and
jobs resubmitted meanwhile may start processes there that die too."""

PlanSource = Callable[[PipelineSpec, int], list[SequencePlan]]
StepReportSource = Callable[[str, int], tuple[dict[str, float], list[dict[str, Any]]] | None]
"""(pipeline id, 0-based step) -> what real work measured in that step: metrics, samples."""

PRUNES_PER_RETENTION = 16
"""With a retention, pruning runs at most every ``retain_ended_s / PRUNES_PER_RETENTION`` engine
seconds: what is kept stays under ``1 + 1/16`` of the retention, at one short pass per interval."""


@dataclass(slots=True)
class _Run:
    """A pipeline's run: its public record and the steps it has open."""

    record: RunRecord
    lag: int = field(init=False)
    """Steps its rollouts may run ahead of its training (0: sync)."""
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
    unbilled_device_s: float = 0.0
    """Device-seconds (weighted by share) used since the last event that reported usage."""
    pause_requested: bool = False

    def __post_init__(self) -> None:
        spec = self.record.spec
        self.lag = spec.staleness if spec.mode is SyncMode.ASYNC else 0


def _tail_or_tool(node: SubStage) -> bool:
    return node.kind is SubStageKind.TOOL or (node.kind is SubStageKind.DECODE and node.bucket == "tail")


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
        self.runtime: Runtime = runtime or SimRuntime(cluster.num_devices)
        self.scheduler: Scheduler = scheduler or DedicatedScheduler()
        # Roll-forward predictions cost a pass over the open graphs at every event: only for
        # schedulers that read them (ClusterView.rollout_done_s, ReadyStage.chain_s).
        self._predict = bool(getattr(self.scheduler, "uses_predictions", False))
        self.graph_config = graph_config or GraphConfig()
        self._plans = plans
        self._step_reports = step_reports
        self.events = EventLog()
        # Real steps run on the wall clock: the cost model's verl time would not compare.
        self.history = ClusterHistory(cluster, cost, estimate_verl=estimate_verl and step_reports is None)
        self._queued: list[str] = []
        self._runs: dict[str, _Run] = {}
        self._submitted = 0
        self._active_ids: set[str] = set()
        """Pipelines starting or running: the loop reads them at every event, and ``_runs`` also
        holds every ended run of the retention window."""
        self._running: dict[str, Task] = {}
        self._started_s: dict[str, float] = {}
        self._worker_losses: dict[str, list[float]] = {}
        """Per pipeline id, when its worker died under it (kept when it is handed back)."""
        self._node_lost_s: float | None = None
        """When a device was last lost with its node."""
        self._lost: dict[int, str] = {}
        """Devices whose node is gone (the runtime says), each with why: nothing is placed there."""
        self._lost_since_s: dict[int, float] = {}
        self._retain_ended_s = retain_ended_s
        self._next_prune_s = 0.0

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
        self._runs[pipeline_id] = _Run(RunRecord(parsed, self._submitted, steps_done=parsed.start_step))
        self._queued.append(pipeline_id)
        self._watch_devices()
        self._status(pipeline_id, PipelineState.QUEUED, self._waiting_reason())
        if schedule:
            self._schedule()

    def cancel(self, pipeline_id: str) -> bool:
        run = self._runs.get(pipeline_id)
        if run is None:
            raise UnknownPipelineError(pipeline_id)
        if run.record.state.is_terminal:
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
        if run.record.state.is_terminal or run.record.state is PipelineState.PAUSED:
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
        if run.record.state is not PipelineState.PAUSED:
            return False
        run.pause_requested = False
        self._queued.append(pipeline_id)
        self._status(pipeline_id, PipelineState.QUEUED, f"resuming after step {run.record.steps_done}")
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
        if self._watch_devices():  # a node left or came back: hand back what it held, place anew
            self._schedule()
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
    @property
    def timeline(self) -> list[TimelineSpan]:
        """Every span that ran (within the retention), in order of its end."""
        return self.history.timeline

    @property
    def finished_steps(self) -> list[FinishedStep]:
        """Every finished step in order of its end, with its verl estimate (the cluster page)."""
        return self.history.finished_steps

    @property
    def decision_latencies_s(self) -> list[float]:
        return self.history.decision_latencies_s

    def knows(self, pipeline_id: str) -> bool:
        return pipeline_id in self._runs

    def state_of(self, pipeline_id: str) -> PipelineState:
        return self._runs[pipeline_id].record.state

    def timeline_window(self, window_s: float) -> dict[str, Any]:
        """What ran in the last ``window_s`` seconds of the engine's clock, and what runs now
        (open spans end at ``now_s``): the cluster page's sub-stage timeline."""
        now = self.runtime.now_s
        running = []
        for task_id, task in self._running.items():
            node = task.node
            running.append(TimelineSpan(task.pipeline_id, node.kind.value, node.bucket, node.step, node.worker,
                                        task.devices, self._started_s[task_id], now, task.share))  # fmt: skip
        window = self.history.window(now, window_s, running)
        window["lost_devices"] = self._lost_view()
        return window

    def pipeline_states(self) -> dict[str, str]:
        return {pid: run.record.state.value for pid, run in self._runs.items()}

    def finished_runs(self) -> dict[str, RunRecord]:
        """The record of every pipeline that succeeded (and is not forgotten)."""
        return {pid: r.record for pid, r in self._runs.items() if r.record.state is PipelineState.SUCCEEDED}

    def describe(self) -> dict[str, Any]:
        """``pipelines``: how many this engine has had in each state, forgotten ones included."""
        by_state = dict(self.history.forgotten_by_state)
        for run in self._runs.values():
            by_state[run.record.state.value] = by_state.get(run.record.state.value, 0) + 1
        return {
            "cluster": {
                "device_type": self.cluster.device_type,
                "num_devices": self.cluster.num_devices,
                "devices_in_use": len(self.runtime.device_load()),
                "lost_devices": self._lost_view(),
            },
            "scheduler": self.scheduler.name,
            "pipelines": by_state,
            "clock_s": self.runtime.now_s,
        }

    # -- the loop ----------------------------------------------------------------------
    def _active(self) -> dict[str, _Run]:
        """Starting and running pipelines, in the order they were submitted (as in ``_runs``)."""
        runs = self._runs
        return {pid: runs[pid] for pid in sorted(self._active_ids, key=lambda pid: runs[pid].record.order)}

    def _schedule(self) -> None:
        self._watch_devices()
        specs = {pid: self._runs[pid].record.spec for pid in self._queued}
        for pid in self.scheduler.admit(self._view(), specs) if specs else ():
            self._queued.remove(pid)
            run = self._runs[pid]
            run.record.started_s = self.runtime.now_s
            self._status(pid, PipelineState.STARTING, f"placed on {run.record.spec.resources.num_gpus} devices")
        for pid, run in self._active().items():
            self._open_steps(pid, run)
        view = self._view()
        if not view.ready:
            return
        started = time.perf_counter()
        tasks = self.scheduler.decide(view)
        self.history.decision_latencies_s.append(time.perf_counter() - started)
        for task in tasks:
            self.runtime.start(task)
            self._running[task.task_id] = task
            self._started_s[task.task_id] = self.runtime.now_s
            run = self._runs[task.pipeline_id]
            run.started.add((task.node.step, task.node.node_id))
            run.frontier.discard((task.node.step, task.node.node_id))
            if run.record.state is PipelineState.STARTING and task.node.kind is not SubStageKind.LOAD:
                self._status(task.pipeline_id, PipelineState.RUNNING, "training")

    def _open_steps(self, pipeline_id: str, run: _Run) -> None:
        """Build graphs for the steps allowed to exist: up to ``lag`` ahead of the oldest open."""
        while (
            not run.pause_requested
            and len(run.graphs) <= run.lag
            and run.record.steps_done + len(run.graphs) < run.record.spec.total_steps
        ):
            step = run.record.steps_done + len(run.graphs)
            try:
                plans = self._plans(run.record.spec, step)
                spec = run.record.spec
                if isinstance(self.scheduler, Resizer):
                    resources = self.scheduler.resources_for_step(self._view(), pipeline_id, step)
                    spec = replace(run.record.spec, resources=resources)
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
            return s - run.lag - 1 < run.record.steps_done
        return node.devices == 0 or node.kind is SubStageKind.LOAD or s == run.record.steps_done

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
                    ready.append(ReadyStage(pid, node, chain_s(run.predictor, graph, node) if self._predict else 0.0))
            if self._predict and run.record.steps_done in run.graphs:
                in_rollout.append(pid)
        load = self.runtime.device_load()
        if self._lost:  # full: no share of a lost device is free
            load.update(dict.fromkeys(self._lost, 1.0))
        return ClusterView(
            now_s=self.runtime.now_s,
            num_devices=self.cluster.num_devices,
            device_load=load,
            ready=tuple(ready),
            specs={pid: run.record.spec for pid, run in active.items()},
            queued=tuple(self._queued),
            progress={pid: (run.record.steps_done, run.record.spec.total_steps) for pid, run in active.items()},
            recent_step_s={
                pid: sum(run.record.step_latencies_s[-3:]) / len(run.record.step_latencies_s[-3:])
                for pid, run in active.items()
                if run.record.step_latencies_s
            },
            running=tuple(self._running.values()),
            rollout_done_s=OnDemand(in_rollout, lambda pid: self._rollout_eta(pid, active[pid])),
            lost=frozenset(self._lost),
        )

    def _rollout_eta(self, pid: str, run: _Run) -> float | None:
        graph = run.graphs[run.record.steps_done]
        return rollout_eta(pid, run.predictor, graph, run.done, self.runtime.now_s, self._started_s, self._running)

    def _on_finished(self, finished: TaskFinished) -> None:
        task, node = finished.task, finished.task.node
        self._running.pop(task.task_id, None)
        self._started_s.pop(task.task_id, None)
        span = self.history.span(finished)
        run = self._runs.get(task.pipeline_id)
        if run is None or run.record.state.is_terminal:  # handed back, or ended, meanwhile
            return
        run.unbilled_device_s += len(task.devices) * (finished.end_s - finished.start_s) * span.share
        if finished.lost and len(self._worker_losses.get(task.pipeline_id, ())) < MAX_WORKER_LOSSES:
            now = self.runtime.now_s
            if self._node_lost_s is None or now - self._node_lost_s > NODE_LOSS_WINDOW_S:
                self._worker_losses.setdefault(task.pipeline_id, []).append(now)
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
            run.record.prediction_errors.append(max(run.predictor.last_errors.values(), default=0.0))
        run.done -= {(step, n.node_id) for n in graph.nodes}
        run.started -= {(step, n.node_id) for n in graph.nodes}
        run.frontier -= {(step, n.node_id) for n in graph.nodes}
        spans = run.step_spans.pop(step)
        plans = run.plans.pop(step)
        spec = run.step_specs.pop(step)
        metrics = step_metrics(spec, spans, plans, peak_flops=self.cost.device.peak_flops_bf16)
        run.record.steps_done += 1
        run.record.step_latencies_s.append(metrics["timing_s/step"])
        run.record.tokens += int(metrics["perf/total_num_tokens"])
        metrics["usage/device_seconds"] = run.unbilled_device_s
        run.unbilled_device_s = 0.0
        real = self._step_reports(pipeline_id, step) if self._step_reports is not None else None
        if real is not None:  # the real job's own measurements win over the model's
            before_train, own = split_before_train(real[0])
            metrics.update(own)
            if before_train:  # validated before its first step: step 0, as verl logs it
                self.events.append(
                    pipeline_id,
                    EventKind.METRICS,
                    self.runtime.now_s,
                    {
                        "step": run.record.steps_done - 1,
                        "total_steps": run.record.spec.total_steps,
                        "metrics": before_train,
                    },
                )
        self.history.step(pipeline_id, run.record.spec, step, spans, plans, int(metrics["perf/total_num_tokens"]))
        self.events.append(
            pipeline_id,
            EventKind.METRICS,
            self.runtime.now_s,
            {"step": run.record.steps_done, "total_steps": run.record.spec.total_steps, "metrics": metrics},
        )
        if real is not None and real[1]:
            self.events.append(
                pipeline_id, EventKind.SAMPLES, self.runtime.now_s, {"step": run.record.steps_done, "samples": real[1]}
            )
        failures = reward_failure_log(run.record.steps_done, metrics, real[1] if real is not None else [])
        if failures is not None:  # an installed reward failed: the job goes on, and says so
            self.events.append(
                pipeline_id, EventKind.LOG, self.runtime.now_s, {"level": "warning", "message": failures}
            )
        if run.record.steps_done >= run.record.spec.total_steps:
            self._end(pipeline_id, run, PipelineState.SUCCEEDED, f"completed {run.record.steps_done} steps")
        elif run.pause_requested:
            self._abort(pipeline_id)
            self._pause_now(pipeline_id, run)

    def _pause_now(self, pipeline_id: str, run: _Run) -> None:
        for open_state in (run.graphs, run.plans, run.step_specs, run.step_spans):
            open_state.clear()
        for node_set in (run.done, run.started, run.frontier):
            node_set.clear()
        self.scheduler.release(pipeline_id)
        self._status(pipeline_id, PipelineState.PAUSED, f"paused after step {run.record.steps_done} (its checkpoint)")

    def _abort(self, pipeline_id: str) -> None:
        for task in self.runtime.abort(pipeline_id):
            self._running.pop(task.task_id, None)
            self._started_s.pop(task.task_id, None)

    def _end(self, pipeline_id: str, run: _Run, state: PipelineState, reason: str) -> None:
        run.record.ended_s = self.runtime.now_s
        run.graphs.clear()
        run.step_specs.clear()
        run.frontier.clear()
        self.scheduler.release(pipeline_id)
        self.runtime.release(pipeline_id)
        self._status(pipeline_id, state, reason)
        if self._retain_ended_s is not None:
            self.history.ended(run.record.ended_s, self.events.last_seq, pipeline_id)

    # -- retention ---------------------------------------------------------------------
    def _prune(self, retain_s: float) -> None:
        """Drop what ended more than ``retain_s`` engine seconds ago, and forget the runs that
        ended then once the reader has stored their last event."""
        now = self.runtime.now_s
        self._next_prune_s = now + retain_s / PRUNES_PER_RETENTION
        cutoff = now - retain_s

        def record_of(pipeline_id: str) -> RunRecord | None:
            run = self._runs.get(pipeline_id)
            return None if run is None else run.record

        for pipeline_id in self.history.prune(cutoff, self.events.read_through, record_of):
            del self._runs[pipeline_id]
            self._worker_losses.pop(pipeline_id, None)
        self.events.forget_read_before(cutoff)

    # -- lost nodes ----------------------------------------------------------------------
    def _watch_devices(self) -> bool:
        """Take in which devices the runtime says are gone; whether that changed. A pipeline
        whose work of an open step ran or runs on a device just lost is handed back: its
        state there (a KV cache, an update under way) went with the node, and its checkpoint
        is the step before. The scheduler places nothing on a lost device until it is back."""
        lost = self.runtime.lost_devices()
        if lost == self._lost:
            return False
        gone = {d: why for d, why in lost.items() if d not in self._lost}
        back = sorted(d for d in self._lost if d not in lost)
        now = self.runtime.now_s
        self._lost = dict(lost)
        for d in back:
            del self._lost_since_s[d]
        if back:
            logger.warning("devices %s are back; %d device(s) still lost", back, len(lost))
        for d in gone:
            self._lost_since_s[d] = now
        if gone:
            self._node_lost_s = now
            for losses in self._worker_losses.values():  # those were the node's, not the jobs'
                losses[:] = [t for t in losses if now - t > NODE_LOSS_WINDOW_S]
            causes = sorted(set(gone.values()))
            logger.warning("devices %s lost (%s)", sorted(gone), "; ".join(causes))
            for pid, run in list(self._active().items()):
                touched = self._devices_of_open_steps(pid, run) & set(gone)
                if touched:
                    cause = f"device(s) {', '.join(map(str, sorted(touched)))} lost: {'; '.join(causes)}"
                    self._hand_back(pid, cause)
        return True

    def _devices_of_open_steps(self, pipeline_id: str, run: _Run) -> set[int]:
        """Devices that hold the pipeline's state now: where its open steps' work ran or runs."""
        used = {d for spans in run.step_spans.values() for span in spans for d in span.devices}
        used.update(d for task in self._running.values() if task.pipeline_id == pipeline_id for d in task.devices)
        return used

    def _lost_view(self) -> list[dict[str, Any]]:
        """Each lost device, its node, why and since when (engine seconds): the cluster page."""
        per_node = self.cluster.devices_per_node
        return [
            {"device": d, "node": d // per_node, "reason": why, "since_s": self._lost_since_s[d]}
            for d, why in sorted(self._lost.items())
        ]

    def _waiting_reason(self) -> str:
        if not self._lost:
            return "waiting for devices"
        nodes = sorted({d // self.cluster.devices_per_node for d in self._lost})
        return (
            f"waiting for devices ({len(self._lost)} of {self.cluster.num_devices} lost with node(s) "
            f"{', '.join(map(str, nodes))}; it runs on what remains, or when they are back)"
        )

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
        run.record.state = state
        if state in (PipelineState.STARTING, PipelineState.RUNNING):
            self._active_ids.add(pipeline_id)
        else:
            self._active_ids.discard(pipeline_id)
        logger.info("pipeline %s -> %s (%s)", pipeline_id, state.value, reason)
        data: dict[str, Any] = {
            "status": state.value,
            "reason": reason,
            "step": run.record.steps_done,
            "total_steps": run.record.spec.total_steps,
        }
        if run.unbilled_device_s > 0:
            data["device_seconds"] = run.unbilled_device_s
            run.unbilled_device_s = 0.0
        self.events.append(pipeline_id, EventKind.STATUS, self.runtime.now_s, data)
