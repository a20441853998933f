"""Continuous-batching rollout of one worker, simulated exactly between batch changes.

Between two events (a sequence finishing a turn, a tool call returning, a sequence admitted)
the running batch ``B`` is constant and the resident context grows by ``B`` tokens per
iteration, so the iteration cost is linear in the iteration index and ``k`` iterations cost
``k * t(B, C0 + B*(k-1)/2)`` exactly. That is as exact as iterating one by one and far faster.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.spec.models import ModelSpec
from jigsaw_engine.workload.plans import SequencePlan


@dataclass(slots=True)
class _Seq:
    plan: SequencePlan
    turn: int = 0
    context: int = 0
    """Context tokens when the sequence last joined the batch (tokens since then come on top)."""
    joined_at: int = 0
    """The worker's iteration counter when it joined."""
    reserved: int = 0

    def context_at(self, iteration: int) -> int:
        return self.context + iteration - self.joined_at


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
TAIL_ENTRY_PEAK_FRACTION = 0.25
"""A worker is in its long tail (and may hand its sequences on) once its batch is a tail batch
and at most this fraction of the largest batch it ran: a worker that is small from the start
is not a tail."""


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
    tail_peak_context_tokens: int = 0
    """Most KV-cache tokens resident during tail iterations: what a co-runner must leave room for."""
    tail_entry_s: float | None = None
    """When the worker first decodes a tail iteration (see :data:`TAIL_ENTRY_PEAK_FRACTION`)
    with nothing left to admit and no tool call in flight: from there its unfinished sequences
    could move to another worker."""
    tail_remaining: tuple[SequencePlan, ...] = ()
    """Those unfinished sequences at ``tail_entry_s``, as plans whose prompt is their context so
    far (what a target worker re-prefills) and whose turns are what is left to generate."""
    tail_entry_marks: tuple[float, int, float] = (0.0, 0, 0.0)
    """(tail seconds, tail tokens, tool-wait seconds) before ``tail_entry_s``: what the worker
    itself does if its sequences move on."""
    arrival_tail_marks: list[tuple[float, int]] = field(default_factory=list)
    """(tail seconds, tail tokens) decoded before each batch of migrated sequences arrived."""
    context_token_s: float = 0.0
    """Integral of resident KV-cache tokens over decode time (``/ decode_s``: the mean)."""
    batch_trace: list[tuple[float, int]] = field(default_factory=list)
    """(time_s, running sequences) at every batch change: what the controller observes."""


def simulate_worker(
    cost: RooflineCostModel,
    model: ModelSpec,
    plans: list[SequencePlan],
    *,
    tp: int = 1,
    buckets: DecodeBuckets = DecodeBuckets(),
    arrivals: tuple[tuple[float, tuple[SequencePlan, ...]], ...] = (),
    prefix_cache: bool = True,
) -> WorkerRollout:
    """One worker's rollout of ``plans``. ``arrivals`` are sequences migrated in from other
    workers, (time, plans) in time order, each re-prefilled when it arrives. With
    ``prefix_cache`` (vLLM, SGLang) a turn after a tool call prefills only the tool's output;
    without it the engine prefills the whole conversation again. The result is shared between
    identical calls (every policy of a benchmark replays the same rollouts): treat it as
    read-only."""
    return _simulate_worker(cost, model, tuple(plans), tp, buckets, arrivals, prefix_cache)


@lru_cache(maxsize=8192)
def _simulate_worker(
    cost: RooflineCostModel,
    model: ModelSpec,
    plans: tuple[SequencePlan, ...],
    tp: int,
    buckets: DecodeBuckets,
    arrivals: tuple[tuple[float, tuple[SequencePlan, ...]], ...],
    prefix_cache: bool,
) -> WorkerRollout:
    out = WorkerRollout()
    incoming = list(reversed(arrivals))  # pop() takes the next arrival
    peak_batch = 0
    capacity = cost.kv_capacity_tokens(model, tp=tp)
    pending = [_Seq(p) for p in plans]
    pending.reverse()  # pop() admits in submission order
    # Running sequences in a heap by the iteration at which their turn ends: each batch change
    # costs O(log B), not a pass over the batch.
    running: list[tuple[int, int, _Seq]] = []  # (ends_at_iteration, tie, seq)
    waiting: list[tuple[float, int, _Seq]] = []  # (wake_s, tie, seq): tool calls in flight
    reserved = 0
    context = 0
    iteration = 0
    t = 0.0
    tie = 0

    def join(s: _Seq, context_tokens: int) -> None:
        nonlocal tie
        s.context, s.joined_at = context_tokens, iteration
        tie += 1
        heapq.heappush(running, (iteration + s.plan.turn_tokens[s.turn], tie, s))

    while pending or running or waiting or incoming:
        while incoming and incoming[-1][0] <= t:
            _, moved = incoming.pop()
            out.arrival_tail_marks.append((out.bucket_s["tail"], out.bucket_tokens["tail"]))
            pending.extend(_Seq(p) for p in reversed(moved))  # admitted next, before anything else
        if not (pending or running or waiting):
            t = incoming[-1][0]  # idle until the next arrival
            continue
        # Admit what fits: a sequence reserves its full worst-case context, so it never
        # has to be preempted (vLLM preempts instead; same throughput when capacity is ample).
        admitted: list[int] = []
        cached_rows = len(running)
        while pending:
            s = pending[-1]
            need = s.plan.total_tokens
            if reserved + need > capacity and (running or waiting):
                break
            pending.pop()
            reserved += need
            s.reserved = need
            context += s.plan.prompt_tokens
            admitted.append(s.plan.prompt_tokens)
            join(s, s.plan.prompt_tokens)
        if admitted:
            dt = _prefill_s(cost, model, tp, admitted) + _merge_s(cost, model, tp, running, iteration, cached_rows)
            t += dt
            out.prefill_s += dt

        if not running:
            wake_s, _, s = heapq.heappop(waiting)
            out.tool_wait_s += max(0.0, wake_s - t)
            t = max(t, wake_s)
            context += _rejoin(s, join)
            dt = _turn_prefill_s(cost, model, tp, [s], prefix_cache)
            t += dt
            out.prefill_s += dt
            continue

        batch = len(running)
        out.batch_trace.append((t, batch))
        peak_batch = max(peak_batch, batch)
        if (
            out.tail_entry_s is None
            and not pending
            and not waiting
            and buckets.bucket_of(batch) == "tail"
            and batch <= TAIL_ENTRY_PEAK_FRACTION * peak_batch
        ):
            out.tail_entry_s = t
            out.tail_entry_marks = (out.bucket_s["tail"], out.bucket_tokens["tail"], out.tool_wait_s)
            out.tail_remaining = tuple(_remaining_plan(s, end - iteration, iteration) for end, _, s in sorted(running))
        k = running[0][0] - iteration
        if waiting or incoming:
            wake = min(([waiting[0][0]] if waiting else []) + ([incoming[-1][0]] if incoming else []))
            per_iter = cost.decode_iteration_s(model, batch=batch, context_tokens=context, tp=tp)
            k = max(1, min(k, math.ceil((wake - t) / per_iter)))
        mean_context = context + batch * (k - 1) / 2.0
        read = mean_context  # KV tokens an iteration reads: the cache rows, or (padded) rows x widest
        if cost.device.padded_kv_cache:
            read = batch * (_widest(running, iteration) + (k - 1) / 2.0)
        dt = k * cost.decode_iteration_s(model, batch=batch, context_tokens=read, tp=tp)
        out.context_token_s += mean_context * dt
        t += dt
        out.decode_s += dt
        out.iterations += k
        out.tokens_generated += k * batch
        bucket = buckets.bucket_of(batch)
        out.bucket_s[bucket] += dt
        out.bucket_tokens[bucket] += k * batch
        context += k * batch
        iteration += k
        out.peak_context_tokens = max(out.peak_context_tokens, context)
        if bucket == "tail":
            out.tail_peak_context_tokens = max(out.tail_peak_context_tokens, context)

        cut_s = _cut_s(cost, model, tp, running, iteration)
        while running and running[0][0] <= iteration:
            _, _, s = heapq.heappop(running)
            s.context = s.context_at(iteration)
            if s.turn + 1 < len(s.plan.turn_tokens):
                tie += 1
                heapq.heappush(waiting, (t + s.plan.tool_waits_s[s.turn], tie, s))
            else:
                context -= s.context
                reserved -= s.reserved
        if cut_s:  # the rows left are copied out of the cache at the next iteration
            t += cut_s
            out.decode_s += cut_s
            out.bucket_s[bucket] += cut_s

        rejoined: list[_Seq] = []
        cached_rows = len(running)
        while waiting and waiting[0][0] <= t:
            _, _, s = heapq.heappop(waiting)
            context += _rejoin(s, join)
            rejoined.append(s)
        if rejoined:
            dt = _turn_prefill_s(cost, model, tp, rejoined, prefix_cache)
            dt += _merge_s(cost, model, tp, running, iteration, cached_rows)
            t += dt
            out.prefill_s += dt

    out.duration_s = t
    return out


def _remaining_plan(s: _Seq, left: int, iteration: int) -> SequencePlan:
    """What is left of a running sequence, as a plan another worker can take over."""
    later = s.plan.turn_tokens[s.turn + 1 :]
    return SequencePlan(
        s.context_at(iteration), (left, *later), s.plan.tool_waits_s[s.turn :], s.plan.tool_output_tokens
    )


def _prefill_s(
    cost: RooflineCostModel, model: ModelSpec, tp: int, lengths: list[int], prefixes: list[int] | None = None
) -> float:
    """One prefill forward of ``lengths`` new tokens per sequence, each after its ``prefixes``
    cached tokens (none by default; attention: every new token over its whole context). A padded
    engine computes every sequence at the longest length (and keeps no prefix cache)."""
    if cost.device.padded_kv_cache:
        lengths = [max(lengths)] * len(lengths)
    before = prefixes or [0] * len(lengths)
    square = sum(n * (p + n) for n, p in zip(lengths, before, strict=True))
    return cost.prefill_s(model, tokens=sum(lengths), tp=tp, square_tokens=square, sequences=len(lengths))


def _merge_s(
    cost: RooflineCostModel,
    model: ModelSpec,
    tp: int,
    running: list[tuple[int, int, _Seq]],
    iteration: int,
    cached_rows: int,
) -> float:
    """A padded engine merges the rows it just prefilled into the running batch's cache by
    copying the whole of it at its widest row (:meth:`RooflineCostModel.kv_copy_s`); nothing
    when no row was cached (the prefill's cache is the batch's) or for a paged engine."""
    if not cost.device.padded_kv_cache or cached_rows == 0:
        return 0.0
    return cost.kv_copy_s(model, tokens=len(running) * _widest(running, iteration), tp=tp)


def _cut_s(
    cost: RooflineCostModel, model: ModelSpec, tp: int, running: list[tuple[int, int, _Seq]], iteration: int
) -> float:
    """A padded engine drops the rows whose turn ends now by copying the rows left out of its
    cache, as wide as it was (:meth:`RooflineCostModel.kv_copy_s`); nothing when no row ends
    or none is left, or for a paged engine."""
    if not cost.device.padded_kv_cache or not running or running[0][0] > iteration:
        return 0.0
    left = sum(1 for end, _, _ in running if end > iteration)
    return cost.kv_copy_s(model, tokens=left * _widest(running, iteration), tp=tp) if left else 0.0


def _widest(running: list[tuple[int, int, _Seq]], iteration: int) -> int:
    """The longest running row's context: a padded cache's width."""
    return max(s.context_at(iteration) for _, _, s in running)


def _turn_prefill_s(
    cost: RooflineCostModel, model: ModelSpec, tp: int, rejoined: list[_Seq], prefix_cache: bool
) -> float:
    """The prefill of turns rejoining after their tool calls: with a prefix cache the tools'
    outputs, attending over the whole conversation; without, each whole conversation again."""
    if not prefix_cache:
        return _prefill_s(cost, model, tp, [s.context for s in rejoined])
    outputs = [s.plan.tool_output_tokens for s in rejoined]
    return _prefill_s(cost, model, tp, outputs, [s.context - n for s, n in zip(rejoined, outputs, strict=True)])


def _rejoin(s: _Seq, join: Callable[[_Seq, int], None]) -> int:
    """Start the next turn after a tool call; returns the context tokens it appends."""
    s.turn += 1
    join(s, s.context + s.plan.tool_output_tokens)
    return s.plan.tool_output_tokens
