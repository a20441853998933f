"""Long-tail migration: the unfinished sequences of several rollout workers consolidated onto few.

A worker whose batch has fallen into the tail (fewer tokens per decode iteration than the tail
threshold, nothing left to admit, no tool call in flight) hands its unfinished sequences to a
worker already in its tail and still decoding, as long as the merged batch stays within
``max_batch``. The target re-prefills them (prompt plus everything generated so far) and decodes
them beside its own; the source's devices are free from that moment. No sequence is dropped or
truncated: the target generates exactly the tokens the source would have, so RL semantics are
unchanged. The decision uses what a running engine reports (when a worker's batch enters the
tail, how many sequences it holds, when a target is expected to finish), not future lengths.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jigsaw_engine.workload.decode_sim import WorkerRollout


@dataclass(frozen=True, slots=True)
class Migration:
    source: int
    """Worker whose unfinished sequences move."""
    target: int
    """Worker that takes them over."""
    at_s: float
    """Time into the step's rollout when they move (the source's tail entry)."""


@dataclass(slots=True)
class _Collector:
    worker: int
    expected_end_s: float
    batch: int
    kv_tokens: int


def plan_tail_migrations(
    rollouts: Mapping[int, WorkerRollout], *, max_batch: int, kv_capacity_tokens: int
) -> list[Migration]:
    """Workers in the order they enter their tails; each joins a collector (a worker already in
    its tail and still decoding) with room in its batch (``max_batch``: the merged batch stays
    a tail) and in its KV cache (the moved sequences' full context, reserved as the engine
    does); of those, the one expected to end first (the least loaded). A worker with no such
    collector keeps its sequences and becomes a collector. (Requiring the collector to outlast
    the worker, so the step never ends later, measured worse: 36.8k against 40.6k tokens/s on
    M5 at staleness 4.)"""
    entries = sorted((r.tail_entry_s, w) for w, r in rollouts.items() if r.tail_entry_s is not None)
    collectors: list[_Collector] = []
    migrations: list[Migration] = []
    for at_s, w in entries:
        moving = rollouts[w].tail_remaining
        kv = sum(p.total_tokens for p in moving)
        room = [
            c
            for c in collectors
            if c.expected_end_s > at_s and c.batch + len(moving) <= max_batch and c.kv_tokens + kv <= kv_capacity_tokens
        ]
        if room:
            target = min(room, key=lambda c: (c.expected_end_s, c.worker))
            target.batch += len(moving)
            target.kv_tokens += kv
            migrations.append(Migration(w, target.worker, at_s))
        else:
            collectors.append(_Collector(w, rollouts[w].duration_s, len(moving), kv))
    return migrations
