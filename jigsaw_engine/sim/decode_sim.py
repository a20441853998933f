"""Continuous-batching rollout of one worker, simulated exactly between batch changes.

Between two events (a sequence finishing a turn, a tool call returning, a sequence admitted)
the running batch ``B`` is constant and the resident context grows by ``B`` tokens per
iteration, so the iteration cost is linear in the iteration index and ``k`` iterations cost
``k * t(B, C0 + B*(k-1)/2)`` exactly. That is as exact as iterating one by one and far faster.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.sim.lengths import SequencePlan
from jigsaw_engine.spec.models import ModelSpec


@dataclass(slots=True)
class _Seq:
    plan: SequencePlan
    turn: int = 0
    remaining: int = 0
    context: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class DecodeBuckets:
    """Decode iterations are classed by the tokens they process (one per running sequence):
    dense iterations are compute-heavy, tail iterations are memory-bound and leave the
    device mostly idle, which is what co-location and migration exploit."""

    dense_min_tokens: int = 1024
    """An iteration with at least this many tokens is ``dense``."""
    tail_max_tokens: int = 128
    """An iteration with fewer tokens than this is ``tail``; in between is ``medium``."""

    def bucket_of(self, tokens: int) -> str:
        if tokens >= self.dense_min_tokens:
            return "dense"
        return "tail" if tokens < self.tail_max_tokens else "medium"


BUCKET_NAMES = ("dense", "medium", "tail")


@dataclass(slots=True)
class WorkerRollout:
    """What one rollout worker did in one step."""

    duration_s: float = 0.0
    decode_s: float = 0.0
    prefill_s: float = 0.0
    iterations: int = 0
    tokens_generated: int = 0
    bucket_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(BUCKET_NAMES, 0.0))
    """Decode time by :class:`DecodeBuckets` class."""
    bucket_tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUCKET_NAMES, 0))
    tool_wait_s: float = 0.0
    """Time with nothing to decode because every live sequence waits on a tool call."""
    peak_context_tokens: int = 0
    """Most KV-cache tokens resident at once: the worker's memory high-water mark."""
    batch_trace: list[tuple[float, int]] = field(default_factory=list)
    """(time_s, running sequences) at every batch change: what the controller observes."""


def simulate_worker(
    cost: RooflineCostModel,
    model: ModelSpec,
    plans: list[SequencePlan],
    *,
    tp: int = 1,
    buckets: DecodeBuckets = DecodeBuckets(),
) -> WorkerRollout:
    out = WorkerRollout()
    capacity = cost.kv_capacity_tokens(model, tp=tp)
    pending = [_Seq(p) for p in plans]
    pending.reverse()  # pop() admits in submission order
    running: list[_Seq] = []
    waiting: list[tuple[float, int, _Seq]] = []  # (wake_s, tie, seq): tool calls in flight
    reserved = 0
    context = 0
    t = 0.0
    tie = 0

    while pending or running or waiting:
        # Admit what fits: a sequence reserves its full worst-case context, so it never
        # has to be preempted (vLLM preempts instead; same throughput when capacity is ample).
        admitted_tokens = 0
        while pending:
            s = pending[-1]
            need = s.plan.total_tokens
            if reserved + need > capacity and (running or waiting):
                break
            pending.pop()
            reserved += need
            s.reserved = need
            s.remaining = s.plan.turn_tokens[0]
            s.context = s.plan.prompt_tokens
            context += s.context
            admitted_tokens += s.plan.prompt_tokens
            running.append(s)
        if admitted_tokens:
            dt = cost.prefill_s(model, tokens=admitted_tokens, tp=tp)
            t += dt
            out.prefill_s += dt

        if not running:
            wake_s, _, s = heapq.heappop(waiting)
            out.tool_wait_s += max(0.0, wake_s - t)
            t = max(t, wake_s)
            context += _rejoin(s, running)
            dt = cost.prefill_s(model, tokens=s.plan.tool_output_tokens, tp=tp)
            t += dt
            out.prefill_s += dt
            continue

        batch = len(running)
        out.batch_trace.append((t, batch))
        k = min(s.remaining for s in running)
        if waiting:
            per_iter = cost.decode_iteration_s(model, batch=batch, context_tokens=context, tp=tp)
            k = max(1, min(k, math.ceil((waiting[0][0] - t) / per_iter)))
        dt = k * cost.decode_iteration_s(model, batch=batch, context_tokens=context + batch * (k - 1) / 2.0, tp=tp)
        t += dt
        out.decode_s += dt
        out.iterations += k
        out.tokens_generated += k * batch
        bucket = buckets.bucket_of(batch)
        out.bucket_s[bucket] += dt
        out.bucket_tokens[bucket] += k * batch
        context += k * batch
        out.peak_context_tokens = max(out.peak_context_tokens, context)

        still: list[_Seq] = []
        for s in running:
            s.remaining -= k
            s.context += k
            if s.remaining > 0:
                still.append(s)
            elif s.turn + 1 < len(s.plan.turn_tokens):
                tie += 1
                heapq.heappush(waiting, (t + s.plan.tool_waits_s[s.turn], tie, s))
            else:
                context -= s.context
                reserved -= s.reserved
        running = still

        rejoined_tokens = 0
        while waiting and waiting[0][0] <= t:
            _, _, s = heapq.heappop(waiting)
            context += _rejoin(s, running)
            rejoined_tokens += s.plan.tool_output_tokens
        if rejoined_tokens:
            dt = cost.prefill_s(model, tokens=rejoined_tokens, tp=tp)
            t += dt
            out.prefill_s += dt

    out.duration_s = t
    return out


def _rejoin(s: _Seq, running: list[_Seq]) -> int:
    """Start the next turn after a tool call; returns the context tokens it appends."""
    s.turn += 1
    s.remaining = s.plan.turn_tokens[s.turn]
    s.context += s.plan.tool_output_tokens
    running.append(s)
    return s.plan.tool_output_tokens
