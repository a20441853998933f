"""verl-named metrics of one finished step, from what actually ran (its timeline spans)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.workload.plans import SequencePlan

_STAGE_METRIC = {
    "reward": "timing_s/reward",
    "old_logprob": "timing_s/old_log_prob",
    "ref_logprob": "timing_s/ref",
    "train": "timing_s/update_actor",
    "weight_sync": "timing_s/sync",
}


class SpanLike(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def bucket(self) -> str | None: ...
    @property
    def worker(self) -> int | None: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...


def step_metrics(
    spec: PipelineSpec, spans: Sequence[SpanLike], plans: Sequence[SequencePlan], *, peak_flops: float
) -> dict[str, float]:
    """``perf/throughput`` is trained tokens per second per GPU, as in verl."""
    start = min(s.start_s for s in spans)
    end = max(s.end_s for s in spans)
    latency = end - start
    # A worker's own spans, less the log-prob forwards it may run once its rollout is done.
    rollout = [s for s in spans if s.worker is not None and s.kind not in _STAGE_METRIC]
    metrics: dict[str, Any] = {
        "timing_s/step": latency,
        "timing_s/gen": max(s.end_s for s in rollout) - min(s.start_s for s in rollout),
        "timing_s/gen_tail": max((s.end_s - s.start_s for s in rollout if s.bucket == "tail"), default=0.0),
    }
    for kind, name in _STAGE_METRIC.items():
        metrics[name] = sum(s.end_s - s.start_s for s in spans if s.kind == kind)
    lengths = [p.response_tokens for p in plans]
    tokens = sum(p.total_tokens for p in plans)
    gpus = spec.resources.num_gpus
    metrics.update(
        {
            "response_length/mean": sum(lengths) / len(lengths),
            "response_length/max": float(max(lengths)),
            "response_length/clip_ratio": sum(n >= spec.rollout.max_response_length for n in lengths) / len(lengths),
            "perf/total_num_tokens": float(tokens),
            "perf/throughput": tokens / (latency * gpus),
            "perf/mfu": 6.0 * spec.model.num_params * tokens / (gpus * peak_flops * latency),
        }
    )
    return metrics


BEFORE_TRAIN_PREFIX = "before_train:"
"""A real step's report carries metrics measured before the job's first step (verl's
``val_before_train`` validation) under this prefix; the controller reports them as step 0."""


def split_before_train(metrics: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """(the metrics of step 0, unprefixed; the step's own) of one real step's report."""
    before = {k.removeprefix(BEFORE_TRAIN_PREFIX): v for k, v in metrics.items() if k.startswith(BEFORE_TRAIN_PREFIX)}
    own = {k: v for k, v in metrics.items() if not k.startswith(BEFORE_TRAIN_PREFIX)}
    return before, own


REWARD_FAILURES = "critic/score/failed"
"""The real job's count of replies whose reward failed (``jigsaw_engine.rl.metrics``, above this layer)."""


def reward_failure_log(step: int, metrics: dict[str, float], samples: Sequence[dict[str, Any]]) -> str | None:
    """The job log's line for a step whose reward failed on some replies (they scored 0): how
    many, and one reason as a sample shows it; None when every reply was scored."""
    failed = int(metrics.get(REWARD_FAILURES, 0))
    if failed <= 0:
        return None
    reason = next((str(s["reward_error"]) for s in samples if s.get("reward_error")), "")
    replies = "reply" if failed == 1 else "replies"
    return f"step {step}: the reward failed on {failed} {replies}, scored 0" + (f"; e.g. {reason}" if reason else "")
