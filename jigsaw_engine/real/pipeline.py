"""One pipeline's sub-stages run for real: each graph node becomes a phase of an :class:`RLJob` step.

The scheduler sees each step as a sub-stage graph (``docs/architecture.md``); this is where its
nodes turn into work (``docs/real-runs.md`` lists what each node runs). A decode node of worker
``w`` generates until the worker's unfinished episodes fall to the bucket's share (half for
``dense``, an eighth for ``medium``, none for ``tail``): the same boundaries the cost model uses,
counted in sequences because a tiny model never reaches the token thresholds of a real one.
Tool waits happen inside the episodes (a retriever call is a real wait), so ``tool`` nodes have
no work of their own.

An asynchronous pipeline (``mode: async``, ``staleness`` k) has up to k + 1 steps open: the
controller starts a worker's rollout of step ``s`` once the weight sync of ``s - k - 1`` is done,
so its decode nodes run beside an earlier step's log-prob forwards and update, possibly on
other threads of this process at the same moment. Each node acts on its own step; the job
itself refuses a rollout further ahead than k or a training phase out of order
(:class:`~jigsaw_engine.train.rl_job.RLJob`), whatever calls it.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jigsaw_engine.control.step_metrics import BEFORE_TRAIN_PREFIX
from jigsaw_engine.graph.substage import SubStage, SubStageKind
from jigsaw_engine.train.rl_job import RLJob, StepOrderError
from jigsaw_engine.train.validation import (
    TESTING_TIME,
    ValidationPlan,
    ValidationReply,
    ValidationResult,
    data_source_of,
    validation_metrics,
)

logger = logging.getLogger(__name__)

LIVE_SHARE_AFTER_BUCKET: dict[str, float] = {"dense": 0.5, "medium": 0.125, "tail": 0.0}
"""Share of a worker's episodes still unfinished when each decode bucket ends."""

VALIDATIONS_KEPT = 4
"""Validation passes whose graded replies a pipeline keeps (:attr:`RealPipeline.validations`)."""


@dataclass(frozen=True, slots=True)
class NodeReport:
    node_id: str
    duration_s: float
    step_metrics: dict[str, float] | None = None
    """The step's metrics, on the node that closes a step (weight sync)."""
    samples: list[dict[str, Any]] | None = None
    """A few of the step's completions with their rewards, on the same node."""


class RealPipeline:
    """Runs the nodes the controller starts, in the order its dependencies allow."""

    def __init__(
        self,
        job: RLJob,
        *,
        train_parts: int,
        checkpoint_dir: Path | None = None,
        start_step: int | None = None,
        validation: ValidationPlan | None = None,
    ) -> None:
        """``start_step`` None resumes after the latest checkpoint (a job run step by step);
        a number resumes after exactly that step, 0 starts afresh: the controller, which
        counts the steps, decides (after an engine restart it resumes from what the control
        plane recorded, which may lag the latest checkpoint). ``validation``: when to validate
        and on what (``data.val_files``); a fresh job asked to validates here, before its first step."""
        if train_parts < 1:
            raise ValueError(f"train_parts: must be >= 1, got {train_parts}")
        if checkpoint_dir is not None:
            check_checkpoint_folder(checkpoint_dir)
        self.job = job
        self._checkpoint_dir = checkpoint_dir
        self.resumed_at_step = 0
        if start_step:
            if checkpoint_dir is None:
                raise ValueError(f"cannot resume after step {start_step}: this engine keeps no real checkpoints")
            job.restore_checkpoint(checkpoint_dir, start_step)
            self.resumed_at_step = job.step
        elif start_step is None and checkpoint_dir is not None and job.restore_checkpoint(checkpoint_dir):
            self.resumed_at_step = job.step
        self._train_parts = train_parts
        self._lock = threading.Lock()
        self.step_metrics: list[dict[str, float]] = []
        self._validation = validation
        self.validations: deque[ValidationResult] = deque(maxlen=VALIDATIONS_KEPT)
        """The latest validation passes, with their graded replies."""
        self._before_train: dict[str, float] | None = None
        """The pass before the first step, until the first step's report carries it."""
        if validation is not None and validation.before_train and job.step == 0:
            self._before_train = self._validate().metrics

    def run_node(self, node: SubStage) -> NodeReport:
        started = time.perf_counter()
        metrics = self._run(node)
        samples = list(self.job.recent_samples) if metrics is not None else None
        return NodeReport(node.node_id, time.perf_counter() - started, metrics, samples)

    def _run(self, node: SubStage) -> dict[str, float] | None:
        if node.kind in (SubStageKind.LOAD, SubStageKind.TOOL):
            return None
        try:
            return self._run_phase(node)
        except StepOrderError as exc:
            raise StepOrderError(f"node {node.node_id}: {exc}") from exc

    def _run_phase(self, node: SubStage) -> dict[str, float] | None:
        job, kind, step = self.job, node.kind, node.step
        if kind in (SubStageKind.PREFILL, SubStageKind.DECODE):
            with self._lock:
                if step >= job.next_step:  # as wide as the scheduler made it, up to the engines built
                    job.begin_step(workers=min(node.workers, len(job.engines)), step=step)
            worker = node.worker if node.worker is not None else 0
            if worker >= job.workers_of(step):
                return None
            if kind is SubStageKind.PREFILL:
                job.start_rollout(worker, step=step)
                return None
            _, total = job.live_episodes(worker, step=step)
            share = LIVE_SHARE_AFTER_BUCKET.get((node.bucket or "tail").split(".")[0], 0.0)
            job.rollout(worker, until_live_at_most=math.floor(share * total), step=step)
            return None
        return self._run_pipeline_wide(node)

    def _run_pipeline_wide(self, node: SubStage) -> dict[str, float] | None:
        job, step = self.job, node.step
        if node.kind is SubStageKind.REWARD:
            # Every decode node has run by now; any episode still open (a bucket the graph did
            # not predict) is finished here rather than lost.
            job.score(step=step)
        elif node.kind is SubStageKind.OLD_LOGPROB:
            job.old_log_probs(step=step)
        elif node.kind is SubStageKind.REF_LOGPROB:
            job.ref_log_probs(step=step)
        elif node.kind is SubStageKind.TRAIN:
            part = int((node.bucket or "mb0").removeprefix("mb")) + 1
            job.train(part, self._train_parts, step=step)
        elif node.kind is SubStageKind.WEIGHT_SYNC:
            metrics = job.sync_weights(step=step)
            self._checkpoint()
            metrics.update(self._validation_metrics())
            self.step_metrics.append(metrics)
            return metrics
        return None

    def run_step(self) -> dict[str, float]:
        """A whole step outside the controller (tests, resumable jobs run step by step)."""
        metrics = self.job.run_step()
        self._checkpoint()
        metrics.update(self._validation_metrics())
        self.step_metrics.append(metrics)
        return metrics

    def _validation_metrics(self) -> dict[str, float]:
        """What the step just trained reports of validation: the pass before training (on the
        first step's report, under :data:`BEFORE_TRAIN_PREFIX`) and this step's pass if due."""
        metrics: dict[str, float] = {}
        if self._before_train is not None:
            metrics.update({BEFORE_TRAIN_PREFIX + name: value for name, value in self._before_train.items()})
            self._before_train = None
        if self._validation is not None and self._validation.due_after(self.job.step):
            metrics.update(self._validate().metrics)
        return metrics

    def _validate(self) -> ValidationResult:
        plan = self._validation
        assert plan is not None
        started = time.perf_counter()
        episodes = self.job.generate_for_validation(plan.env, n=plan.n, temperature=plan.temperature)
        metrics = validation_metrics(episodes, plan.n)
        metrics[TESTING_TIME] = time.perf_counter() - started
        replies = [
            ValidationReply(data_source_of(e), *self.job.decode_reply(e), answer=e.task.answer, reward=e.reward)
            for e in episodes
        ]
        result = ValidationResult(self.job.step, metrics, replies)
        self.validations.append(result)
        return result

    def _checkpoint(self) -> None:
        if self._checkpoint_dir is not None:
            self.job.save_checkpoint(self._checkpoint_dir)


def check_checkpoint_folder(folder: Path) -> None:
    """Raise, naming the folder and this host, unless this process can write checkpoints there.
    A job may run on any node and resume on another, so its checkpoints must be where every
    node reads and writes (``docs/operations.md``); a folder one node cannot write fails the job
    when it is built, not after its first step."""
    probe = folder / f".write-check-{socket.gethostname()}-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise PermissionError(
            f"checkpoint folder {folder} cannot be written on host {socket.gethostname()}: "
            f"{exc.strerror or exc}; point ENGINE_REAL_CHECKPOINT_DIR at storage every Ray node can write"
        ) from exc
