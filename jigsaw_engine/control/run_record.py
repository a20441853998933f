"""What the controller records of the runs: each pipeline's :class:`RunRecord`, and the
cluster's :class:`ClusterHistory` (the timeline, the finished steps with their verl estimate,
the scheduler's decision latencies), pruned to a retention for an engine that runs for ever.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jigsaw_engine.contracts import PipelineState
from jigsaw_engine.control.verl_estimate import FinishedStep, verl_comparison, verl_step_times
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.tasks import TaskFinished
from jigsaw_engine.workload.plans import SequencePlan

logger = logging.getLogger(__name__)

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
class RunRecord:
    """One pipeline's run as the controller reports it (``ClusterController.finished_runs``):
    its spec, where it stands, what it produced and when. The controller updates it; readers
    only read."""

    spec: PipelineSpec
    order: int
    """Submission number: the controller visits pipelines in this order."""
    state: PipelineState = PipelineState.QUEUED
    steps_done: int = 0
    """Steps finished (a resumed run counts from the step it resumed after)."""
    step_latencies_s: list[float] = field(default_factory=list)
    prediction_errors: list[float] = field(default_factory=list)
    """Per finished step, the worst relative error of the durations predicted for it (roll-forward
    schedulers only)."""
    tokens: int = 0
    started_s: float | None = None
    """When it was admitted (engine clock); None while it waits."""
    ended_s: float | None = None

    def step_period_s(self) -> float:
        """Wall time per step from admission to the end: a step's latency as its user sees it,
        also for async pipelines, whose individual steps overlap."""
        return ((self.ended_s or 0.0) - (self.started_s or 0.0)) / max(1, self.steps_done)


class ClusterHistory:
    """The cluster's past: every span that ran, every finished step (with, when asked, verl's
    time for the same sequences from the same cost model), and the scheduler's decision
    latencies. With a retention, what ended longer ago is dropped (:meth:`prune`)."""

    def __init__(self, cluster: ClusterSpec, cost: RooflineCostModel, *, estimate_verl: bool) -> None:
        self._cluster, self._cost = cluster, cost
        self._estimate_verl = estimate_verl
        self.timeline: list[TimelineSpan] = []
        self.finished_steps: list[FinishedStep] = []
        """Every finished step in order of its end, with its verl estimate (the cluster page)."""
        self.decision_latencies_s: list[float] = []
        self._ended: deque[tuple[float, int, str]] = deque()
        """With a retention: (ended at, seq of its last event, id) of ended runs, oldest first."""
        self.forgotten_by_state: dict[str, int] = {}
        """Runs forgotten, by final state."""

    def span(self, finished: TaskFinished) -> TimelineSpan:
        """Record a finished task's span."""
        task, node = finished.task, finished.task.node
        span = TimelineSpan(task.pipeline_id, node.kind.value, node.bucket, node.step, node.worker,
                            task.devices, finished.start_s, finished.end_s,
                            task.share if finished.mean_share is None else finished.mean_share)  # fmt: skip
        self.timeline.append(span)
        return span

    def step(
        self,
        pipeline_id: str,
        spec: PipelineSpec,
        step: int,
        spans: list[TimelineSpan],
        plans: list[SequencePlan],
        tokens: int,
    ) -> None:
        """Keep the finished step for the cluster page: its span of time, its work, and (when
        estimated) verl's time for the same sequences, from the same cost model."""
        dedicated = serial = float("nan")
        if self._estimate_verl:
            try:
                dedicated, serial = verl_step_times(self._cost, self._cluster, spec, plans, step)
            except Exception:  # an estimate must never stop a pipeline
                logger.exception("pipeline %s: no verl estimate for step %d", pipeline_id, step)
        self.finished_steps.append(
            FinishedStep(
                pipeline_id=pipeline_id,
                step=step + 1,
                start_s=min(s.start_s for s in spans),
                end_s=max(s.end_s for s in spans),
                tokens=tokens,
                flops=6.0 * spec.model.num_params * tokens,
                verl_gpus=spec.resources.num_gpus,
                verl_dedicated_s=dedicated,
                verl_serial_s=serial,
            )
        )

    def window(self, now_s: float, window_s: float, running: list[TimelineSpan]) -> dict[str, Any]:
        """What ran in the last ``window_s`` seconds before ``now_s``, and the spans of what runs
        now (``running``, ending at ``now_s``): the cluster page's sub-stage timeline."""
        since = now_s - window_s

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
        spans += [as_dict(span, True) for span in running]
        steps = []
        for step in reversed(self.finished_steps):
            if step.end_s < since:
                break
            steps.append(step)
        steps.reverse()
        return {
            "now_s": now_s,
            "since_s": since,
            "device_type": self._cluster.device_type,
            "num_devices": self._cluster.num_devices,
            "peak_flops": self._cost.device.peak_flops_bf16,
            "spans": spans,
            "steps": [s.as_dict() for s in steps],
            "verl_estimate": verl_comparison(steps, self._cluster.num_devices),
        }

    def ended(self, ended_s: float, last_seq: int, pipeline_id: str) -> None:
        """A run ended at ``ended_s``, its last event numbered ``last_seq`` (with a retention)."""
        self._ended.append((ended_s, last_seq, pipeline_id))

    def prune(self, cutoff_s: float, read_through: int, record_of: Callable[[str], RunRecord | None]) -> list[str]:
        """Drop what ended before ``cutoff_s``; the runs to forget: those that ended then and
        whose last event the reader has stored (up to ``read_through``). Each list is in order
        of its end, so every pass stops at the first item still due: the cost is what it drops."""
        _drop_ended_before(self.timeline, cutoff_s)
        _drop_ended_before(self.finished_steps, cutoff_s)
        forget = []
        while self._ended and self._ended[0][0] < cutoff_s and self._ended[0][1] <= read_through:
            ended_s, _, pipeline_id = self._ended.popleft()
            run = record_of(pipeline_id)
            if run is None or not run.state.is_terminal or run.ended_s != ended_s:
                continue  # not the run that ended then
            forget.append(pipeline_id)
            self.forgotten_by_state[run.state.value] = self.forgotten_by_state.get(run.state.value, 0) + 1
        del self.decision_latencies_s[:-KEPT_DECISION_LATENCIES]
        return forget


def _drop_ended_before(items: list[TimelineSpan] | list[FinishedStep], cutoff_s: float) -> None:
    """``items`` are in order of their end, near enough: a real runtime reports finishes a poll
    late. The first recent one stops the pass; an older one behind it waits for the next."""
    n = 0
    while n < len(items) and items[n].end_s < cutoff_s:
        n += 1
    del items[:n]
