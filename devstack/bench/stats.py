"""The benchmark's arithmetic: latency percentiles, and for the soak (``--soak``) samples cut
into windows, percentiles per window, the memory trend and its verdict, the printed table.

Pure functions on plain data (no I/O, no third-party imports), so they can be tested alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MIB = 1024 * 1024


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0-100) of values sorted ascending; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_summary(values_ms: Sequence[float]) -> dict[str, Any]:
    if not values_ms:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}
    ordered = sorted(values_ms)
    return {
        "n": len(ordered),
        "p50_ms": _round(percentile(ordered, 50), 2),
        "p95_ms": _round(percentile(ordered, 95), 2),
        "p99_ms": _round(percentile(ordered, 99), 2),
        "max_ms": round(ordered[-1], 2),
        "mean_ms": round(sum(ordered) / len(ordered), 2),
    }


def windowed_p99(samples: Sequence[tuple[float, float]], span_s: float, window_s: float) -> list[dict[str, Any]]:
    """p99 per window of (seconds since the phase began, latency ms) samples; a trailing
    part-window counts (the benchmark's phases are short)."""
    count = max(1, math.ceil(span_s / window_s))
    buckets: list[list[float]] = [[] for _ in range(count)]
    for t, ms in samples:
        buckets[min(count - 1, max(0, int(t // window_s)))].append(ms)
    return [
        {"from_s": i * window_s, "n": len(b), "p99_ms": _round(percentile(sorted(b), 99), 2)}
        for i, b in enumerate(buckets)
    ]


def window_index(t: float, window_s: float, count: int) -> int | None:
    """The window that second ``t`` (since measuring began) falls in; None outside the run."""
    if t < 0 or count <= 0:
        return None
    index = int(t // window_s)
    return index if index < count else None


def window_count(duration_s: float, window_s: float) -> int:
    """Whole windows only: a trailing part-window would report percentiles of a handful of samples."""
    return max(1, int(duration_s // window_s))


def latency_windows(
    samples: Iterable[tuple[float, float]], error_times: Iterable[float], duration_s: float, window_s: float
) -> list[dict[str, Any]]:
    """Per window: requests, errors, and p50/p95/p99 of the latencies (ms) sent in it."""
    count = window_count(duration_s, window_s)
    buckets: list[list[float]] = [[] for _ in range(count)]
    errors = [0] * count
    for t, ms in samples:
        index = window_index(t, window_s, count)
        if index is not None:
            buckets[index].append(ms)
    for t in error_times:
        index = window_index(t, window_s, count)
        if index is not None:
            errors[index] += 1
    rows = []
    for i, bucket in enumerate(buckets):
        ordered = sorted(bucket)
        rows.append(
            {
                "from_s": round(i * window_s, 1),
                "n": len(ordered),
                "errors": errors[i],
                **{f"p{q}_ms": _round(percentile(ordered, q)) for q in (50, 95, 99)},
            }
        )
    return rows


def value_windows(samples: Iterable[tuple[float, float]], duration_s: float, window_s: float) -> list[float | None]:
    """The last value sampled in each window (for gauges such as RSS or a queue's length)."""
    count = window_count(duration_s, window_s)
    last: list[tuple[float, float] | None] = [None] * count
    for t, value in samples:
        index = window_index(t, window_s, count)
        if index is not None and (last[index] is None or t >= last[index][0]):  # type: ignore[index]
            last[index] = (t, value)
    return [None if item is None else item[1] for item in last]


def slope_per_minute(samples: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) samples, in value units per minute."""
    if len(samples) < 2:
        return None
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    if spread == 0:
        return None
    return sum((t - mean_t) * (v - mean_v) for t, v in samples) / spread * 60.0


MIN_JUDGED_S = 60.0
"""The shortest stretch a memory slope is judged over: 30 samples at the soak's 2 s."""


def memory_verdict(
    rss_bytes: Mapping[str, Sequence[tuple[float, float]]],
    duration_s: float,
    tolerance_mib_per_min: float,
    fills_by_s: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Per process group: RSS at the start and end, and the slope from half the run on (the first
    half includes warming caches and pools). Flat when every |slope| <= tolerance.

    ``fills_by_s``: for a group that keeps a bounded window of history (the simulated engine keeps
    the recent past), when that window has filled. Until then it grows by design, so its slope is
    taken from the later of half the run and that point; a run too short to leave
    ``MIN_JUDGED_S`` after it is not judged flat."""
    fills_by_s = fills_by_s or {}
    groups: dict[str, Any] = {}
    for name, samples in rss_bytes.items():
        from_s = max(duration_s / 2, fills_by_s.get(name, 0.0))
        judged = [(t, v / MIB) for t, v in samples if from_s <= t <= duration_s]
        inside = [(t, v / MIB) for t, v in samples if 0 <= t <= duration_s]
        long_enough = duration_s - from_s >= min(MIN_JUDGED_S, duration_s / 2)
        slope = slope_per_minute(judged) if long_enough else None
        groups[name] = {
            "start_mib": _round(inside[0][1]) if inside else None,
            "end_mib": _round(inside[-1][1]) if inside else None,
            "peak_mib": _round(max(v for _, v in inside)) if inside else None,
            "from_s": round(from_s, 1),
            "judged_growth_mib": _round(judged[-1][1] - judged[0][1]) if len(judged) >= 2 and long_enough else None,
            "judged_slope_mib_per_min": _round(slope, 3),
            "samples": len(inside),
            "flat": slope is not None and abs(slope) <= tolerance_mib_per_min,
            "too_short": None
            if long_enough
            else f"its history fills by {from_s:.0f} s: run at least {from_s + MIN_JUDGED_S:.0f} s to judge it",
        }
    return {
        "tolerance_mib_per_min": tolerance_mib_per_min,
        "from_s": round(duration_s / 2, 1),
        "groups": groups,
        "flat": bool(groups) and all(g["flat"] for g in groups.values()),
    }


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _cell(value: Any, width: int) -> str:
    text = "-" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))
    return text.rjust(width)


TABLE_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("from_s", "t s", 6),
    ("create_n", "creates", 9),
    ("create_p50_ms", "c p50", 9),
    ("create_p95_ms", "c p95", 9),
    ("create_p99_ms", "c p99", 9),
    ("list_n", "lists", 7),
    ("list_p50_ms", "l p50", 9),
    ("list_p95_ms", "l p95", 9),
    ("list_p99_ms", "l p99", 9),
    ("errors", "errors", 8),
    ("ws_events", "ws ev", 8),
    ("ws_p99_ms", "ws p99", 9),
    ("rss_server_mib", "web MiB", 9),
    ("rss_worker_mib", "celery MiB", 11),
    ("celery_backlog", "backlog", 9),
)


def table_text(rows: Sequence[dict[str, Any]]) -> str:
    """The per-window table: latencies in ms, RSS in MiB at the window's end."""
    header = "".join(title.rjust(width) for _, title, width in TABLE_COLUMNS)
    lines = [header]
    lines.extend("".join(_cell(row.get(key), width) for key, _, width in TABLE_COLUMNS) for row in rows)
    return "\n".join(lines)


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The same table in Markdown (for docs/benchmarks.md)."""
    titles = [title for _, title, _ in TABLE_COLUMNS]
    lines = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
    for row in rows:
        cells = [_cell(row.get(key), 0).strip() for key, _, _ in TABLE_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
