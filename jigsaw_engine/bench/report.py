"""The ``jigsaw bench`` report folder: ``summary.md``, ``results.json`` and plots.

Plots need matplotlib (the ``plot`` extra); without it the markdown and JSON are still written
and the summary says the plots were skipped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from jigsaw_engine.bench.suite import ABLATIONS, BASELINES


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else pattern.format(value)


MEAN_TARGETS = {"mean jigsaw/verl over M0-M4": 1.5, "mean jigsaw/rollmux": 1.25, "mean jigsaw/greedy": 1.1}
"""The product's targets for the suite's means (jigsaw at least this much ahead)."""


def _against_target(ratios: dict[str, Any], key: str) -> str:
    """Four decimals and the verdict, so that a mean just short of its target does not round up to it."""
    value, target = ratios[key], MEAN_TARGETS[key]
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:.4f} (target {target}: {'met' if value >= target else 'missed'})"


def summary_markdown(result: dict[str, Any], plots: list[str]) -> str:
    cfg = result["config"]
    mixes = result["mixes"]
    lines = [
        "# JigsawRL benchmark",
        "",
        f"Simulated, {cfg['steps']} steps, seeds {', '.join(map(str, cfg['seeds']))}; medians over seeds. "
        "Trained tokens/s per policy (all policies of a mix and seed share rollouts and the lower bound).",
        "",
    ]
    shown = [p for p in (*BASELINES, "jigsaw") if p in cfg["policies"]]
    lines += ["| mix | cluster | " + " | ".join(shown) + " | jigsaw / best baseline | jigsaw LB ratio |"]
    lines += ["|---" * (len(shown) + 4) + "|"]
    for label, cell in mixes.items():
        f = cell["policies"]
        ratio = result["ratios"]["per_mix"][label]["jigsaw/best baseline"]
        row = [label, cell["cluster"]] + [_fmt(f[p]["throughput_tokens_per_s"], "{:,.0f}") for p in shown]
        lb = f.get("jigsaw", {}).get("lower_bound_ratio")
        lines.append("| " + " | ".join([*row, _fmt(ratio), _fmt(lb)]) + " |")
    r = result["ratios"]
    lines += [
        "",
        "## Ratios",
        "",
        "| mix | jigsaw/verl | jigsaw/best(streamrl,areal) | jigsaw/rollmux | jigsaw/greedy | bound on jigsaw/verl |",
        "|---|---|---|---|---|---|",
    ]
    for label, ratios in r["per_mix"].items():
        keys = ("jigsaw/verl", "jigsaw/best(streamrl,areal)", "jigsaw/rollmux", "jigsaw/greedy", "bound on jigsaw/verl")
        lines.append("| " + " | ".join([label, *(_fmt(ratios[k]) for k in keys)]) + " |")
    lines += [
        "",
        f"- mean jigsaw/verl over M0-M4: {_against_target(r, 'mean jigsaw/verl over M0-M4')} "
        f"(bound: {_fmt(r.get('bound on mean jigsaw/verl over M0-M4'))})",
        "- bound on jigsaw/verl: 1 / verl's lower-bound ratio, what a schedule reaching the practical "
        "lower bound would gain over verl",
        f"- mean jigsaw/rollmux: {_against_target(r, 'mean jigsaw/rollmux')}",
        f"- mean jigsaw/greedy: {_against_target(r, 'mean jigsaw/greedy')}",
        f"- mixes where jigsaw >= best baseline: {r['mixes where jigsaw >= best baseline']} of {len(mixes)}",
        "",
        "## Per-pipeline step latency against running alone (jigsaw)",
        "",
        "| mix | mean | max | decision p99 (ms) |",
        "|---|---|---|---|",
    ]
    for label, cell in mixes.items():
        j = cell["policies"].get("jigsaw")
        if j:
            lines.append(
                f"| {label} | {_fmt(j['latency_ratio_mean'])} | {_fmt(j['latency_ratio_max'])} "
                f"| {_fmt(j['decision_p99_ms'], '{:.2f}')} |"
            )
    lines += _ceiling_section(result)
    lines += _steady_section(result, shown)
    # An ablation is read against full jigsaw: without it in the run there is nothing to divide by.
    ablations = [a for a in ABLATIONS if a in cfg["policies"]] if "jigsaw" in cfg["policies"] else []
    if ablations:
        lines += ["", "## Ablations (throughput / jigsaw)", ""]
        lines += ["| mix | " + " | ".join(ablations) + " |", "|---" * (len(ablations) + 1) + "|"]
        for label, cell in mixes.items():
            f = cell["policies"]
            base = f["jigsaw"]["throughput_tokens_per_s"]
            lines.append(
                "| " + " | ".join([label, *(_fmt(f[a]["throughput_tokens_per_s"] / base) for a in ablations)]) + " |"
            )
    lines += _greedy_by_seed(result)
    for key, title, flag in (("random", "Random mixes", "--random"), ("long", "Long-response mixes", "--long")):
        if key in result:
            lines += _drawn_section(result[key], title, flag)
    if "scale" in result:
        sc = result["scale"]
        lines += [
            "",
            "## Decision latency at scale",
            "",
            f"jigsaw at {sc['devices']} GPUs x {sc['pipelines']} pipelines, {sc['steps']} steps: "
            f"{sc['decisions']} decisions, p50 {sc['decision_p50_ms']:.2f} ms, p99 {sc['decision_p99_ms']:.2f} ms "
            f"({sc['wall_s']:.0f} s of wall time; `jigsaw bench --scale`).",
        ]
    lines += ["", "## Plots", ""]
    lines += [f"![{p}]({p})" for p in plots] or ["(skipped: matplotlib is not installed)"]
    return "\n".join(lines) + "\n"


def _best_baseline(figures: dict[str, dict[str, Any]]) -> str | None:
    """The baseline with the highest median throughput, as in "jigsaw / best baseline"."""
    present = [b for b in BASELINES if b in figures]
    return max(present, key=lambda b: figures[b]["throughput_tokens_per_s"], default=None)


def _ceiling_section(result: dict[str, Any]) -> list[str]:
    """Share of each synchronous mix's ceiling (:mod:`~jigsaw_engine.bench.ceiling`) that
    jigsaw and the best baseline reach."""
    rows = {label: cell for label, cell in result["mixes"].items() if cell.get("ceiling_s") is not None}
    if not rows:
        return []
    lines = [
        "",
        "## Share of ceiling",
        "",
        "Ceiling: max(practical lower bound, longest pipeline alone on the whole cluster), synchronous "
        "mixes only; share: ceiling / makespan (median over seeds of the per-seed share). The lone "
        "pipeline is measured (the faster of jigsaw and verl), not proven, so a share above 1 is possible.",
        "",
        "| mix | ceiling s | jigsaw | best baseline | its share |",
        "|---|---|---|---|---|",
    ]
    for label, cell in rows.items():
        f = cell["policies"]
        best = _best_baseline(f)
        jigsaw = f.get("jigsaw", {}).get("share_of_ceiling")
        other = f[best]["share_of_ceiling"] if best else None
        lines.append(
            f"| {label} | {cell['ceiling_s']:,.0f} | {_fmt(jigsaw, '{:.1%}')} | {best or 'n/a'} "
            f"| {_fmt(other, '{:.1%}')} |"
        )
    return lines


def _steady_section(result: dict[str, Any], shown: list[str]) -> list[str]:
    """Each policy's throughput in the steady window beside its makespan throughput."""
    if not shown:
        return []
    lines = [
        "",
        "## Steady window (every pipeline still running)",
        "",
        "Trained tokens/s from the moment every pipeline is admitted until the first one ends, beside "
        "the makespan's tokens/s (which adds the ramp-up and the tail); n/a where pipelines ran one "
        "after another.",
        "",
        "| mix | policy | makespan tokens/s | steady tokens/s | steady / makespan | window s |",
        "|---|---|---|---|---|---|",
    ]
    for label, cell in result["mixes"].items():
        for policy in shown:
            f = cell["policies"][policy]
            makespan, steady = f["throughput_tokens_per_s"], f.get("steady_throughput_tokens_per_s")
            gain = None if steady is None else steady / makespan
            lines.append(
                f"| {label} | {policy} | {_fmt(makespan, '{:,.0f}')} | {_fmt(steady, '{:,.0f}')} "
                f"| {_fmt(gain)} | {_fmt(f.get('steady_window_s'), '{:,.0f}')} |"
            )
    return lines


def _greedy_by_seed(result: dict[str, Any]) -> list[str]:
    """jigsaw over greedy on every mix and seed: the look-ahead must never lose to its absence."""
    rows = {
        label: cell["jigsaw/greedy by seed"]
        for label, cell in result["mixes"].items()
        if "jigsaw/greedy by seed" in cell
    }
    if not rows:
        return []
    seeds = result["config"]["seeds"]
    lines = ["", "## jigsaw / greedy by seed", ""]
    lines += ["| mix | " + " | ".join(f"seed {s}" for s in seeds) + " | min |", "|---" * (len(seeds) + 2) + "|"]
    for label, values in rows.items():
        lines.append("| " + " | ".join([label, *(f"{v:.3f}" for v in values), f"{min(values):.3f}"]) + " |")
    return lines


def _drawn_section(rnd: dict[str, Any], title: str, flag: str) -> list[str]:
    """A drawn family's section: wins over the best baseline, jigsaw over greedy, the losses."""
    lines = ["", f"## {title}", ""]
    lines.append(
        f"jigsaw reached the best baseline on {rnd['wins']} of {rnd['count']} {title.lower()} "
        f"({rnd['steps']} steps each; `jigsaw bench {flag} {rnd['count']}`)."
    )
    if rnd.get("min jigsaw/greedy") is not None:
        lines.append(f"jigsaw / greedy: mean {rnd['mean jigsaw/greedy']:.4f}, lowest {rnd['min jigsaw/greedy']:.3f}.")
    shown = [
        m
        for m in rnd["mixes"]
        if (m["jigsaw/best baseline"] is not None and m["jigsaw/best baseline"] < 1.0)
        or (m.get("jigsaw/greedy") is not None and m["jigsaw/greedy"] < 1.0)
    ]
    if shown:
        lines += [
            "",
            "| seed | cluster | pipelines | best baseline | jigsaw / it | jigsaw / greedy |",
            "|---|---|---|---|---|---|",
        ]
        for m in shown:
            lines.append(
                f"| {m['seed']} | {m['cluster']} | {m['pipelines']} | {m['best_baseline'] or 'n/a'} "
                f"| {_fmt(m['jigsaw/best baseline'], '{:.3f}')} | {_fmt(m.get('jigsaw/greedy'), '{:.3f}')} |"
            )
    return lines


def write_report(result: dict[str, Any], out: Path, timelines: list[str]) -> list[Path]:
    """Write the folder; returns the files written. ``timelines`` are PNGs already in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    plots = _plots(result, out) + timelines
    files = [out / "results.json", out / "summary.md"]
    files[0].write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    files[1].write_text(summary_markdown(result, plots))
    return files + [out / p for p in plots]


def _plots(result: dict[str, Any], out: Path) -> list[str]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return []
    mixes = result["mixes"]
    labels = list(mixes)
    written = []

    def bars(name: str, title: str, ylabel: str, series: dict[str, list[float]]) -> None:
        fig = Figure(figsize=(12, 4.5), dpi=110, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(series))
        for i, (policy, values) in enumerate(series.items()):
            ax.bar([x + i * width for x in range(len(labels))], values, width, label=policy)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels)
        ax.axhline(1.0, color="0.3", linewidth=0.8)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize="small", ncols=4)
        fig.savefig(out / name)
        written.append(name)

    def relative(policy: str, base: str) -> list[float]:
        return [
            mixes[m]["policies"][policy]["throughput_tokens_per_s"]
            / mixes[m]["policies"][base]["throughput_tokens_per_s"]
            for m in labels
        ]

    policies = [p for p in (*BASELINES, "jigsaw") if p in result["config"]["policies"]]
    if "verl" in policies:
        bars(
            "throughput.png",
            "Throughput relative to verl (median over seeds)",
            "tokens/s / verl",
            {p: relative(p, "verl") for p in policies},
        )
    if "jigsaw" in result["config"]["policies"]:
        bars(
            "latency_ratio.png",
            "jigsaw: per-pipeline step latency / running alone",
            "ratio",
            {
                "mean": [mixes[m]["policies"]["jigsaw"]["latency_ratio_mean"] for m in labels],
                "max": [mixes[m]["policies"]["jigsaw"]["latency_ratio_max"] for m in labels],
            },
        )
        ablations = [a for a in ABLATIONS if a in result["config"]["policies"]]
        if ablations:
            bars(
                "ablations.png",
                "Ablations: throughput / jigsaw",
                "ratio",
                {a: relative(a, "jigsaw") for a in ablations},
            )
    return written
