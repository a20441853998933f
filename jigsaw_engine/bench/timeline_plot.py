"""The cluster timeline as a Gantt chart (PNG): one row per device, colour = pipeline,
hatch = sub-stage kind, bar height = the share of the device a span held.

matplotlib is imported only when a picture is asked for (the ``plot`` extra)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from jigsaw_engine.control.run_record import TimelineSpan

# Hatch key -> (legend label, hatch). Decode's tail bucket gets its own key ("decode:tail").
_HATCHES: dict[str, tuple[str, str]] = {
    "load": ("load", "--"),
    "prefill": ("prefill", "///"),
    "decode": ("decode (dense/medium)", ""),
    "decode:tail": ("decode (tail)", "xxx"),
    "tool": ("tool", "oo"),
    "reward": ("reward", ".."),
    "old_logprob": ("old log-prob", "\\\\\\"),
    "ref_logprob": ("ref log-prob", "|||"),
    "train": ("train", "++"),
    "weight_sync": ("weight sync", "**"),
    "other": ("other", "O"),
}
_ROW = 0.8  # fraction of a device row a fully used device fills
_HATCH_COLOUR = "0.15"
_EPS = 1e-9


def _hatch_key(span: TimelineSpan) -> str:
    if span.kind == "decode" and span.bucket == "tail":
        return "decode:tail"
    return span.kind if span.kind in _HATCHES else "other"


def _natural(text: str) -> list[int | str]:
    """Sort key that puts p2 before p10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _stack_offsets(spans: Iterable[TimelineSpan], num_devices: int) -> list[tuple[TimelineSpan, int, float]]:
    """(span, device, vertical offset in [0, 1)) for every device a span ran on. Spans sharing a
    device are stacked: each goes to the lowest offset that no time-overlapping span holds."""
    placed: dict[int, list[tuple[float, float, float, float]]] = {}  # device -> (start, end, lo, hi)
    out: list[tuple[TimelineSpan, int, float]] = []
    for span in sorted(spans, key=lambda s: s.start_s):  # stable: ties keep their order
        for device in span.devices:
            if not 0 <= device < num_devices:
                raise ValueError(f"span of {span.pipeline_id} on device {device}; the cluster has {num_devices}")
            row = placed.setdefault(device, [])
            row[:] = [r for r in row if r[1] > span.start_s]  # spans come by start: the ended never overlap again
            busy = [(lo, hi) for start, end, lo, hi in row if start < span.end_s]
            offset = 0.0  # fallback when the free share is fragmented: draw over the others
            for candidate in sorted({0.0, *(hi for _, hi in busy)}):
                top = candidate + span.share
                if top <= 1.0 + _EPS and all(hi <= candidate + _EPS or top <= lo + _EPS for lo, hi in busy):
                    offset = candidate
                    break
            row.append((span.start_s, span.end_s, offset, offset + span.share))
            out.append((span, device, offset))
    return out


def write_timeline_png(
    spans: Iterable[TimelineSpan],
    num_devices: int,
    path: Path,
    *,
    title: str,
    pipeline_names: Mapping[str, str] | None = None,
    max_time_s: float | None = None,
) -> None:
    """Draw ``spans`` (a controller's ``timeline``) on ``num_devices`` rows and save a PNG at
    ``path``. Host-only spans (no devices) are left out; ``max_time_s`` crops the time axis."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PolyCollection
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise RuntimeError("--timeline needs matplotlib: pip install 'jigsawrl[plot]'") from exc

    names = dict(pipeline_names or {})
    shown = [s for s in spans if s.devices and (max_time_s is None or s.start_s < max_time_s)]
    end_s = max_time_s if max_time_s is not None else max((s.end_s for s in shown), default=1.0)

    # Colours by pipeline id in natural order, so p0 has the same colour in every picture.
    pipelines = sorted({s.pipeline_id for s in shown} | set(names), key=_natural)
    palette = matplotlib.colormaps["tab10" if len(pipelines) <= 10 else "tab20"]
    colour = {pid: palette(i % palette.N) for i, pid in enumerate(pipelines)}

    # One barh call per (pipeline, hatch): lists of left, width, bottom, height.
    bars: dict[tuple[str, str], tuple[list[float], list[float], list[float], list[float]]] = {}
    for span, device, offset in _stack_offsets(shown, num_devices):
        lefts, widths, bottoms, heights = bars.setdefault((span.pipeline_id, _hatch_key(span)), ([], [], [], []))
        lefts.append(span.start_s)
        widths.append(min(span.end_s, end_s) - span.start_s)
        bottoms.append(device - _ROW / 2 + offset * _ROW)
        heights.append(span.share * _ROW)

    height_in = min(max(1.5 + 0.4 * num_devices, 4.0), 16.0)
    with matplotlib.rc_context({"hatch.linewidth": 0.6}):
        fig = Figure(figsize=(14, height_in), dpi=120, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for (pid, key), (lefts, widths, bottoms, heights) in bars.items():
            # One collection per (pipeline, hatch): thousands of spans draw in one call.
            boxes = [
                [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
                for x, w, y, h in zip(lefts, widths, bottoms, heights, strict=True)
            ]
            ax.add_collection(PolyCollection(boxes, facecolors=[colour[pid]], edgecolors=[_HATCH_COLOUR],
                                             linewidths=0, hatch=_HATCHES[key][1] or None))  # fmt: skip
        ax.set_xlim(0.0, end_s)
        ax.set_ylim(num_devices - 0.5, -0.5)  # device 0 on top
        ax.set_yticks(range(0, num_devices, max(1, num_devices // 32)))
        ax.set_xlabel("time (s)")
        ax.set_ylabel("device")
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)

        drawn_pids = {pid for pid, _ in bars}
        drawn_keys = {key for _, key in bars}
        pipeline_handles = [Patch(color=colour[p], label=names.get(p, p)) for p in pipelines if p in drawn_pids]
        hatch_handles = [
            Patch(facecolor="0.85", edgecolor=_HATCH_COLOUR, linewidth=0, hatch=hatch, label=label)
            for key, (label, hatch) in _HATCHES.items()
            if key in drawn_keys
        ]
        if pipeline_handles:
            fig.legend(handles=pipeline_handles, loc="outside right upper", title="pipeline", fontsize="small")
            fig.legend(handles=hatch_handles, loc="outside right lower", title="sub-stage", fontsize="small")
        fig.savefig(path)
