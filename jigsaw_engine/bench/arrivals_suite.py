"""``jigsaw bench --arrivals``: a day of arrivals at 60%, 80% and 100% offered load, every policy
under the same admission, with the issue's targets checked against verl on dedicated partitions.

Writes ``arrivals.md`` (the table per load and each target met or missed), ``arrivals.json``
(every figure) and ``arrivals-<load>.png`` (the queue and utilisation over the day) into the
report folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from jigsaw_engine.bench.arrivals_file import parse_arrivals
from jigsaw_engine.bench.arrivals_gen import ArrivalsConfig, generate_arrivals
from jigsaw_engine.bench.arrivals_plot import write_arrivals_png
from jigsaw_engine.bench.arrivals_report import arrivals_table, simulate_arrivals

LOADS = (0.6, 0.8, 1.0)
POLICIES = ("verl-dedicated", "greedy", "jigsaw")
BASELINE = "verl-dedicated"
GOODPUT_TARGET = 1.3
"""jigsaw's goodput over the baseline's at 100% load, at least."""
JCT_TARGET = 0.75
"""jigsaw's mean completion time over the baseline's at 80% load, at most."""
JAIN_TARGET = 0.95


def targets(by_load: Mapping[float, Mapping[str, Any]], policy: str = "jigsaw") -> list[dict[str, Any]]:
    """Each target with its measured value and whether it is met (loads absent are skipped)."""
    out: list[dict[str, Any]] = []
    if 1.0 in by_load:
        p = by_load[1.0]["policies"]
        ratio = p[policy]["goodput_tokens_per_s"] / p[BASELINE]["goodput_tokens_per_s"]
        out.append(_target(f"goodput at 100% load >= {GOODPUT_TARGET}x {BASELINE}", ratio, ratio >= GOODPUT_TARGET))
        jain = p[policy]["tenants"]["jain_index"]
        out.append(_target(f"Jain's index at 100% load >= {JAIN_TARGET}", jain, jain >= JAIN_TARGET))
    if 0.8 in by_load:
        p = by_load[0.8]["policies"]
        ratio = p[policy]["jct_s"]["mean"] / p[BASELINE]["jct_s"]["mean"]
        out.append(_target(f"mean JCT at 80% load <= {JCT_TARGET}x {BASELINE}", ratio, ratio <= JCT_TARGET))
    return out


def _target(text: str, value: float, met: bool) -> dict[str, Any]:
    return {"target": text, "value": value, "met": met}


def run_arrivals_suite(
    out: Path,
    *,
    day: ArrivalsConfig = ArrivalsConfig(),
    loads: Sequence[float] = LOADS,
    policies: Sequence[str] = POLICIES,
    progress: Callable[[str], None] = lambda message: None,
) -> list[str]:
    """Every load's day (``day`` at each of ``loads``) simulated; returns the files written."""
    by_load: dict[float, dict[str, Any]] = {}
    files: list[str] = []
    for load in loads:
        progress(f"arrivals at {load:.0%} offered load")
        arrivals = parse_arrivals(generate_arrivals(replace(day, load=load)))
        result, runs = simulate_arrivals(arrivals, list(policies))
        by_load[load] = result
        name = f"arrivals-{round(load * 100)}.png"
        try:
            cluster = arrivals.cluster
            title = f"{load:.0%} offered load: {cluster.num_devices} x {cluster.device_type}"
            write_arrivals_png(runs, cluster.num_devices, arrivals.day_s, out / name, title=title)
            files.append(name)
        except RuntimeError as exc:  # no matplotlib: the report says so
            progress(str(exc))
    checked = targets(by_load) if BASELINE in policies and "jigsaw" in policies else []
    (out / "arrivals.json").write_text(
        json.dumps({"loads": {str(k): v for k, v in by_load.items()}, "targets": checked}, indent=2, sort_keys=True)
        + "\n"
    )
    (out / "arrivals.md").write_text(_markdown(by_load, checked, day.seed))
    return [*files, "arrivals.json", "arrivals.md"]


def _markdown(by_load: Mapping[float, Mapping[str, Any]], checked: list[dict[str, Any]], seed: int) -> str:
    lines = ["# A day of arrivals", ""]
    for load, result in by_load.items():
        cluster = result["cluster"]
        lines += [
            f"## {load:.0%} offered load (measured {result['offered_load']:.2f})",
            "",
            f"{cluster['num_devices']} x {cluster['device_type']}, {result['jobs']} jobs ({result['steps']} steps), "
            f"a day of {result['day_s']:.0f} s, seed {seed}. JCT and waits in seconds.",
            "",
            "```",
            *arrivals_table(result),
            "```",
            "",
        ]
    if checked:
        lines += ["## Targets", "", "| target | measured | met |", "| --- | ---: | --- |"]
        lines += [f"| {t['target']} | {t['value']:.2f} | {'yes' if t['met'] else 'no'} |" for t in checked]
        lines.append("")
    return "\n".join(lines)
