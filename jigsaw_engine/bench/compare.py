"""Policies side by side: one mechanism, two runtimes.

``jigsaw simulate`` runs each policy on the simulator (:mod:`jigsaw_engine.bench.simulate`),
``jigsaw run`` for real (:mod:`jigsaw_engine.real.run`). Both hand
:func:`compare_policies` a ``run_one`` that runs one policy on its runtime and returns its
figures (:func:`policy_figures`, :func:`pipeline_figures` and what the runtime adds), and get
the same report back: a composite policy as the best of its members, and every pipeline's
latency ratio against its step latency alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jigsaw_engine.control.run_record import RunRecord
from jigsaw_engine.spec.workload_file import WorkloadFile

Figures = dict[str, Any]
"""One policy's run: ``throughput_tokens_per_s``, ``makespan_s``, ``pipelines`` (each
pipeline's figures, by the name the report gives it) and what its runtime adds."""
RunOne = Callable[[str], Figures]
Progress = Callable[[int, int, str], None]
"""(runs done, runs in all, the policy about to run or ``done``)."""


def compare_policies(
    workload: WorkloadFile,
    policies: Sequence[str],
    run_one: RunOne,
    *,
    runs: Sequence[str] | None = None,
    composites: Mapping[str, Sequence[str]] | None = None,
    alone: Mapping[str, float] | str | None = None,
    progress: Progress | None = None,
    needless: Callable[[str, Mapping[str, Figures]], bool] | None = None,
) -> dict[str, Any]:
    """``run_one`` each of ``runs`` (default: ``policies``) in order, and report ``policies``
    in order: a run's figures, or for a name in ``composites`` those of its member that ran
    with the highest throughput (``chosen`` names it; a composite none of whose members ran is
    left out). ``alone``: each pipeline's step latency alone, or the run whose step latencies
    stand for it; every pipeline of every run then gets its ``latency_ratio_vs_alone``.
    ``needless(name, figures so far)``: true where the report cannot use that run (a
    composite's member proven to lose to one that ran), which is then skipped."""
    composites = composites or {}
    order = list(policies if runs is None else runs)
    results: dict[str, Figures] = {}
    for i, name in enumerate(order):
        if progress is not None:
            progress(i, len(order), name)
        if needless is None or not needless(name, results):
            results[name] = run_one(name)
    if progress is not None:
        progress(len(order), len(order), "done")
    if isinstance(alone, str):
        alone = step_latencies(results[alone]) if alone in results else None
    if alone is not None:
        add_latency_ratios(results.values(), alone)
    report: dict[str, Figures] = {}
    for name in policies:
        members = [m for m in composites.get(name, ()) if m in results]
        if members:
            best = max(members, key=lambda m: results[m]["throughput_tokens_per_s"])
            report[name] = {**results[best], "chosen": best}
        elif name in results:
            report[name] = results[name]
    cluster = workload.cluster
    return {"cluster": {"num_devices": cluster.num_devices, "device_type": cluster.device_type}, "policies": report}


def policy_figures(tokens: float, makespan_s: float, pipelines: Mapping[str, Figures]) -> Figures:
    """What every runtime reports of a policy's run."""
    return {"throughput_tokens_per_s": tokens / makespan_s, "makespan_s": makespan_s, "pipelines": dict(pipelines)}


def pipeline_figures(record: RunRecord, *, steps: int, tokens: float) -> Figures:
    """What every runtime reports of a pipeline's run: its step latency as its user sees it
    (admission to end over ``steps``: async steps overlap), its rate of ``tokens``, its end."""
    span_s = (record.ended_s or 0.0) - (record.started_s or 0.0)
    return {
        "step_latency_s": span_s / max(1, steps),
        "tokens_per_s": tokens / span_s if span_s else 0.0,
        "completion_s": record.ended_s,
    }


def step_latencies(figures: Figures) -> dict[str, float]:
    """Each pipeline's step latency in a run (one where each ran alone stands for alone)."""
    return {name: f["step_latency_s"] for name, f in figures["pipelines"].items()}


def add_latency_ratios(results: Iterable[Figures], alone: Mapping[str, float]) -> None:
    """Each pipeline's step latency over its latency alone, on every run in ``results``."""
    for figures in results:
        for name, f in figures["pipelines"].items():
            f["latency_ratio_vs_alone"] = f["step_latency_s"] / alone[name]
