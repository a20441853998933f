"""A day of arrivals as a picture (PNG): jobs waiting, and the cluster's busy share, over the
day, one line per policy. matplotlib is imported only when a picture is asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from jigsaw_engine.bench.service_sim import ServiceRun

UTILISATION_BINS = 48


def utilisation_series(run: ServiceRun, num_devices: int, day_s: float) -> list[tuple[float, float]]:
    """(bin middle, busy share of the cluster in that bin) over the day."""
    width = day_s / UTILISATION_BINS
    busy = [0.0] * UTILISATION_BINS
    for span in run.controller.timeline:
        if not span.devices:
            continue
        weight = len(span.devices) * span.share
        first, last = int(span.start_s // width), int(min(span.end_s, day_s - 1e-9) // width)
        for b in range(max(0, first), min(UTILISATION_BINS - 1, last) + 1):
            overlap = min(span.end_s, (b + 1) * width) - max(span.start_s, b * width)
            if overlap > 0:
                busy[b] += overlap * weight
    return [((b + 0.5) * width, busy[b] / (width * num_devices)) for b in range(UTILISATION_BINS)]


def _steps(samples: Sequence[tuple[float, int]], day_s: float) -> tuple[list[float], list[int]]:
    xs = [t for t, _ in samples if t <= day_s]
    ys = [n for t, n in samples if t <= day_s]
    return xs, ys


def write_arrivals_png(
    runs: Mapping[str, ServiceRun], num_devices: int, day_s: float, path: Path, *, title: str
) -> None:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise RuntimeError("--plot needs matplotlib: pip install 'jigsawrl[plot]'") from exc
    figure = Figure(figsize=(10, 6.5))
    FigureCanvasAgg(figure)
    queue_ax, util_ax = figure.subplots(2, 1, sharex=True)
    hours = 24.0 / day_s
    for name, run in runs.items():
        xs, ys = _steps(run.queue_samples, day_s)
        queue_ax.step([x * hours for x in xs], ys, where="post", label=name)
        series = utilisation_series(run, num_devices, day_s)
        util_ax.plot([x * hours for x, _ in series], [100 * u for _, u in series], label=name)
    queue_ax.set_ylabel("jobs waiting")
    queue_ax.set_title(title)
    queue_ax.legend(loc="upper left")
    util_ax.set_ylabel("devices busy (%)")
    util_ax.set_xlabel("hour of the day")
    util_ax.set_ylim(0, 100)
    util_ax.set_xlim(0, 24)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
