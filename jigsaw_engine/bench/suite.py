"""``jigsaw bench``: every policy on every built-in mix over several seeds, medians and ratios.

Each (mix, seed) is one :func:`~jigsaw_engine.bench.simulate.simulate_workload` call, so all
policies of a cell share the controller, cost model, sampled rollouts and lower bound. The
headline ratios are of medians over seeds, and each mix also keeps ``jigsaw`` over ``greedy``
seed by seed (the look-ahead must never lose to its absence). Random mixes (``--random N``,
:func:`~jigsaw_engine.bench.mixes.random_mix_document`) and long-response mixes (``--long N``,
:func:`~jigsaw_engine.bench.mixes.long_mix_document`) are scored by whether ``jigsaw`` reaches
the best baseline and by ``jigsaw`` over ``greedy``.

Each policy also keeps its throughput in the steady window while every pipeline runs
(:mod:`~jigsaw_engine.bench.steady_window`; None where pipelines run one after another) and, on
synchronous mixes, its share of the mix's ceiling (:mod:`~jigsaw_engine.bench.ceiling`: the
ceiling over its makespan, seed by seed).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jigsaw_engine.bench.ceiling import ceiling_s, is_sync_mix
from jigsaw_engine.bench.mixes import build_long_mix, build_random_mix, mix_document
from jigsaw_engine.bench.simulate import POLICIES, PolicyRun, prepare, run_policy, simulate_workload
from jigsaw_engine.spec.workload_file import WorkloadFile, parse_workload

BASELINES = ("verl", "streamrl", "areal", "rollmux", "muxserve")
ABLATIONS = (
    "greedy",
    "jigsaw-no-migration",
    "jigsaw-no-early-logprobs",
    "jigsaw-with-split",
    "jigsaw-no-resize",
    "jigsaw-rollout-only",
    "jigsaw-no-turns",
)
SUITE_POLICIES = (*BASELINES, "jigsaw", *ABLATIONS)
SUITE_MIXES: tuple[tuple[str, str, str | None], ...] = (
    ("M0", "M0", None),
    ("M0-64xa100", "M0", "64xa100"),
    ("M1", "M1", None),
    ("M2", "M2", None),
    ("M3", "M3", None),
    ("M4", "M4", None),
    ("M5", "M5", None),
    ("M5-areal", "M5", "areal"),
    ("MT", "MT", None),
)
"""(label, mix, variant)."""
TIMELINE_MIX = "M0"

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class SuiteConfig:
    mixes: tuple[str, ...] = tuple(label for label, _, _ in SUITE_MIXES)
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 20
    policies: tuple[str, ...] = SUITE_POLICIES
    random_mixes: int = 0
    random_steps: int = 10
    long_mixes: int = 0
    """Long-response mixes (:func:`~jigsaw_engine.bench.mixes.long_mix_document`), at ``random_steps``."""
    scale: bool = False
    """Also time jigsaw's decisions at 1024 GPUs x 64 pipelines (:func:`run_scale`)."""


def _median(values: list[float | None]) -> float | None:
    """Median of the seeds that have a value (a seed without a steady window has none)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _cell_figures(report: dict[str, Any], ceiling: float | None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, r in report["policies"].items():
        ratios = [p["latency_ratio_vs_alone"] for p in r["pipelines"].values()]
        out[name] = {
            "throughput_tokens_per_s": r["throughput_tokens_per_s"],
            "steady_throughput_tokens_per_s": r.get("steady_throughput_tokens_per_s"),
            "steady_window_s": r.get("steady_window_s"),
            "share_of_ceiling": None if ceiling is None else ceiling / r["makespan_s"],
            "lower_bound_ratio": r["lower_bound_ratio"],
            "latency_ratio_mean": statistics.fmean(ratios),
            "latency_ratio_max": max(ratios),
            "decision_p99_ms": r.get("decision_latency_ms", {}).get("p99", 0.0),
        }
    return out


def run_suite(
    config: SuiteConfig,
    progress: Progress = lambda _: None,
    on_timeline: Callable[[str, PolicyRun], None] | None = None,
) -> dict[str, Any]:
    """Run the suite; ``on_timeline(policy, run)`` receives verl's and jigsaw's runs of
    :data:`TIMELINE_MIX` at the first seed (for the timeline pair)."""
    variants = {label: (mix, variant) for label, mix, variant in SUITE_MIXES}
    unknown = [m for m in config.mixes if m not in variants]
    if unknown:
        raise ValueError(f"unknown suite mixes {unknown}; known: {', '.join(variants)}")
    mixes: dict[str, Any] = {}
    for label in config.mixes:
        mix, variant = variants[label]
        doc = mix_document(mix, variant=variant)
        workload = parse_workload(doc)
        per_seed: list[dict[str, dict[str, Any]]] = []
        ceilings: list[float | None] = []
        for seed in config.seeds:
            progress(f"{label} seed {seed}")
            capture = on_timeline is not None and label == TIMELINE_MIX and seed == config.seeds[0]
            runs: dict[str, PolicyRun] = {}
            report = simulate_workload(
                workload,
                list(config.policies),
                steps=config.steps,
                seed=seed,
                on_run=runs.__setitem__ if capture else _drop,
            )
            if is_sync_mix(doc):
                practical_s = report["lower_bound"]["practical_s"]
                ceilings.append(ceiling_s(doc, practical_s, steps=config.steps, seed=seed))
            else:
                ceilings.append(None)
            per_seed.append(_cell_figures(report, ceilings[-1]))
            if capture and on_timeline is not None:
                for policy in ("verl", "jigsaw"):
                    chosen = report["policies"].get(policy, {}).get("chosen", policy)
                    if chosen in runs:
                        on_timeline(policy, runs[chosen])
        mixes[label] = {**_medians(per_seed, workload), "ceiling_s": _median(ceilings)}
        if "jigsaw" in per_seed[0] and "greedy" in per_seed[0]:
            mixes[label]["jigsaw/greedy by seed"] = [_over(cell, "jigsaw", "greedy") for cell in per_seed]
    result: dict[str, Any] = {
        "config": {"seeds": list(config.seeds), "steps": config.steps, "policies": list(config.policies)},
        "mixes": mixes,
        "ratios": _headline_ratios(mixes),
    }
    if config.random_mixes:
        result["random"] = run_random(config.random_mixes, config.random_steps, progress, config.policies)
    if config.long_mixes:
        result["long"] = run_random(
            config.long_mixes, config.random_steps, progress, config.policies, family="long-response"
        )
    if config.scale:
        progress("scaling run: 1024 GPUs x 64 pipelines")
        result["scale"] = run_scale()
    return result


def _drop(name: str, run: PolicyRun) -> None:
    return None


def _over(cell: dict[str, dict[str, Any]], num: str, den: str) -> float:
    return float(cell[num]["throughput_tokens_per_s"] / cell[den]["throughput_tokens_per_s"])


def _medians(per_seed: list[dict[str, dict[str, Any]]], workload: WorkloadFile) -> dict[str, Any]:
    policies = per_seed[0].keys()
    figures = {p: {k: _median([cell[p][k] for cell in per_seed]) for k in per_seed[0][p]} for p in policies}
    cluster = workload.cluster
    return {"cluster": f"{cluster.num_devices}x{cluster.device_type}", "policies": figures}


def _ratio(figures: dict[str, dict[str, float]], num: str, *dens: str) -> float | None:
    if num not in figures or not all(d in figures for d in dens):
        return None
    best = max(figures[d]["throughput_tokens_per_s"] for d in dens)
    return figures[num]["throughput_tokens_per_s"] / best


def _bound_over(figures: dict[str, dict[str, float]], base: str) -> float | None:
    """The most any policy could gain over ``base``: reaching the practical lower bound, a
    policy runs ``1 / base's lower-bound ratio`` times as fast as ``base``. A target above it
    cannot be met under this cost model by any schedule."""
    ratio = figures.get(base, {}).get("lower_bound_ratio")
    return 1.0 / ratio if ratio else None


def _headline_ratios(mixes: dict[str, Any]) -> dict[str, Any]:
    per_mix: dict[str, dict[str, float | None]] = {}
    for label, cell in mixes.items():
        f = cell["policies"]
        baselines = [b for b in BASELINES if b in f]
        per_mix[label] = {
            "jigsaw/verl": _ratio(f, "jigsaw", "verl"),
            "jigsaw/best(streamrl,areal)": _ratio(f, "jigsaw", "streamrl", "areal"),
            "jigsaw/rollmux": _ratio(f, "jigsaw", "rollmux"),
            "jigsaw/greedy": _ratio(f, "jigsaw", "greedy"),
            "jigsaw/best baseline": _ratio(f, "jigsaw", *baselines) if baselines else None,
            "bound on jigsaw/verl": _bound_over(f, "verl"),
        }

    def mean_of(key: str, labels: list[str]) -> float | None:
        values = [v for label in labels if (v := per_mix.get(label, {}).get(key)) is not None]
        return statistics.fmean(values) if values else None

    core: list[str] = [m for m in ("M0", "M1", "M2", "M3", "M4") if m in per_mix]
    return {
        "per_mix": per_mix,
        "mean jigsaw/verl over M0-M4": mean_of("jigsaw/verl", core),
        "bound on mean jigsaw/verl over M0-M4": mean_of("bound on jigsaw/verl", core),
        "mean jigsaw/rollmux": mean_of("jigsaw/rollmux", list(per_mix)),
        "mean jigsaw/greedy": mean_of("jigsaw/greedy", list(per_mix)),
        "mixes where jigsaw >= best baseline": sum(
            1 for r in per_mix.values() if (v := r["jigsaw/best baseline"]) is not None and v >= 1.0
        ),
    }


DRAWN_FAMILIES: dict[str, Callable[[int], WorkloadFile]] = {
    "random": build_random_mix,
    "long-response": build_long_mix,
}
"""Mixes drawn from a seed, by family (``jigsaw bench --random N`` / ``--long N``)."""


def run_random(
    count: int,
    steps: int,
    progress: Progress = lambda _: None,
    policies: tuple[str, ...] = SUITE_POLICIES,
    family: str = "random",
) -> dict[str, Any]:
    """``jigsaw`` against the baselines and ``greedy`` of ``policies`` on ``count`` mixes of a
    drawn family (mix seeds 0..count-1, simulation seed 0 of each)."""
    build = DRAWN_FAMILIES[family]
    run = [p for p in (*BASELINES, "greedy") if p in policies]
    rows: list[dict[str, Any]] = []
    for seed in range(count):
        progress(f"{family} mix {seed + 1}/{count}")
        workload = build(seed)
        report = simulate_workload(workload, [*run, "jigsaw"], steps=steps, seed=0, timing=False)
        tput = {p: r["throughput_tokens_per_s"] for p, r in report["policies"].items()}
        best = max((b for b in BASELINES if b in tput), key=lambda b: tput[b], default=None)
        rows.append(
            {
                "seed": seed,
                "cluster": f"{workload.cluster.num_devices}x{workload.cluster.device_type}",
                "pipelines": len(workload.pipelines),
                "best_baseline": best,
                "jigsaw/best baseline": tput["jigsaw"] / tput[best] if best else None,
                "jigsaw/greedy": tput["jigsaw"] / tput["greedy"] if "greedy" in tput else None,
            }
        )
    wins = sum(1 for r in rows if r["jigsaw/best baseline"] is not None and r["jigsaw/best baseline"] >= 1.0)
    over_greedy: list[float] = [r["jigsaw/greedy"] for r in rows if r["jigsaw/greedy"] is not None]
    return {
        "family": family,
        "count": count,
        "steps": steps,
        "wins": wins,
        "min jigsaw/greedy": min(over_greedy) if over_greedy else None,
        "mean jigsaw/greedy": statistics.fmean(over_greedy) if over_greedy else None,
        "mixes": rows,
    }


def run_scale(devices: int = 1024, replicas: int = 8, steps: int = 3) -> dict[str, Any]:
    """Decision latency at scale: M4's 8 pipelines replicated ``replicas`` times (64 pipelines
    by default, asking for 512 GPUs) on a cluster of ``devices`` GPUs, ``jigsaw`` only."""
    doc = mix_document("M4")
    doc["cluster"]["num_nodes"] = devices // doc["cluster"]["devices_per_node"]
    doc["pipelines"] = [
        {**p, "name": f"{p['name']}-{k}", "seed": p["seed"] + 100 * k}
        for k in range(replicas)
        for p in doc["pipelines"]
    ]
    workload = parse_workload(doc)
    specs = prepare(workload, steps=steps, seed=0)
    started = time.perf_counter()
    run = run_policy(POLICIES["jigsaw"], workload.cluster, specs)
    wall_s = time.perf_counter() - started
    lat = sorted(run.controller.decision_latencies_s) or [0.0]
    return {
        "devices": workload.cluster.num_devices,
        "pipelines": len(specs),
        "steps": steps,
        "decisions": len(lat),
        "decision_p50_ms": 1000 * lat[len(lat) // 2],
        "decision_p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "wall_s": wall_s,
    }
