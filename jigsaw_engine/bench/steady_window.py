"""Throughput in a fixed mix's steady window: from the moment every pipeline has been admitted
until the first one ends. The makespan's throughput mixes that window with the ramp-up (not
every pipeline placed yet) and the tail (the longest pipeline alone); the window shows what
sharing buys while all of them run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from jigsaw_engine.control.run_record import RunRecord
from jigsaw_engine.control.verl_estimate import FinishedStep


def steady_window(runs: Mapping[str, RunRecord]) -> tuple[float, float] | None:
    """(start, end) of the window every pipeline runs in, or None when there is none (one ends
    before another starts: pipelines one after another)."""
    if not runs:
        return None
    starts = [r.started_s for r in runs.values()]
    ends = [r.ended_s for r in runs.values()]
    if any(s is None for s in starts) or any(e is None for e in ends):
        return None
    start = max(s for s in starts if s is not None)
    end = min(e for e in ends if e is not None)
    return (start, end) if end > start else None


def steady_throughput(runs: Mapping[str, RunRecord], steps: Iterable[FinishedStep]) -> dict[str, float] | None:
    """Tokens per second trained within the steady window (each step's tokens counted in
    proportion to the part of it that falls in the window), and the window's length."""
    window = steady_window(runs)
    if window is None:
        return None
    start, end = window
    tokens = 0.0
    for step in steps:
        if step.pipeline_id not in runs:
            continue
        overlap = min(step.end_s, end) - max(step.start_s, start)
        if overlap > 0:
            tokens += step.tokens * overlap / max(step.end_s - step.start_s, 1e-9)
    return {"tokens_per_s": tokens / (end - start), "window_s": end - start}
