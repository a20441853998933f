"""How far a job's estimate lands from its run, over the built-in mixes.

    .venv/bin/python scripts/estimate_error.py [--mixes M0,M1,M2,M3,M5,MT] [--steps 20]

Each pipeline of a mix is estimated as ``POST /api/v1/jobs/estimate`` estimates it
(``control/job_forecast.py``): on its own GPUs (the estimate's figures: a busy cluster) and
alone on the mix's whole cluster (its ``idle_cluster`` best case). Then the mix is run whole on
the simulated engine as the service runs it (the ``jigsaw`` scheduler, the startup time), every
pipeline submitted at once, and each pipeline is also run alone on the cluster for every step.

Per pipeline it prints the estimate's total time and GPU-hours against the run inside the mix
(admission to its last step, and the device time it was billed: what a tenant sees when others
share the cluster), and the idle-cluster estimate against the pipeline run alone (the
extrapolation's own error). Errors are (estimate - run) / run: negative when the run took
longer than estimated.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from typing import Any

from jigsaw_engine.bench.mixes import mix_document
from jigsaw_engine.contracts import EventKind
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.job_forecast import SERVICE_SCHEDULER, forecast_job, own_partition
from jigsaw_engine.control.local_engine import STARTUP_S
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.sched.registry import graph_config_for, make_scheduler
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, parse_pipeline_spec
from jigsaw_engine.spec.workload_file import parse_workload

DEFAULT_MIXES = "M0,M1,M2,M3,M5,MT"
"""The mixes ``jigsaw bench`` runs but M4 (64 GPUs of 32B models: minutes to simulate whole)."""


def run_together(cluster: ClusterSpec, specs: dict[str, PipelineSpec]) -> dict[str, tuple[float, float]]:
    """Pipeline id -> (seconds from its admission to its last step, device-seconds billed), all
    submitted at once on the engine the service runs."""
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    controller = ClusterController(
        cluster,
        cost,
        scheduler=make_scheduler(SERVICE_SCHEDULER, cluster, cost),
        graph_config=replace(graph_config_for(SERVICE_SCHEDULER), startup_s=STARTUP_S),
    )
    for pid, spec in specs.items():
        controller.submit(pid, spec, schedule=False)
    controller.run_until_idle()
    billed = dict.fromkeys(specs, 0.0)
    for event in controller.events.since(0, len(controller.events) + 1):
        if event.kind is EventKind.METRICS:
            billed[event.pipeline_id] += float(event.data["metrics"]["usage/device_seconds"])
        elif event.kind is EventKind.STATUS:
            billed[event.pipeline_id] += float(event.data.get("device_seconds", 0.0))
    runs = controller.finished_runs()
    return {pid: ((runs[pid].ended_s or 0.0) - (runs[pid].started_s or 0.0), billed[pid]) for pid in specs}


def mix_rows(mix: str, steps: int) -> list[dict[str, Any]]:
    workload = parse_workload(mix_document(mix))
    specs = {f"p{i}": replace(parse_pipeline_spec(raw), total_steps=steps) for i, raw in enumerate(workload.pipelines)}
    together = run_together(workload.cluster, specs)
    rows = []
    for pid, spec in specs.items():
        busy = forecast_job(spec, own_partition(workload.cluster, spec.resources.num_gpus))
        idle = forecast_job(spec, workload.cluster)
        alone_s, _ = run_together(workload.cluster, {pid: spec})[pid]
        mixed_s, mixed_billed = together[pid]
        rows.append(
            {
                "mix": mix,
                "pipeline": f"{spec.name} ({spec.resources.num_gpus} GPUs)",
                "forecast_s": busy.total_s,
                "mixed_s": mixed_s,
                "forecast_gpu_h": busy.gpu_hours,
                "mixed_gpu_h": mixed_billed / 3600,
                "idle_forecast_s": idle.total_s,
                "alone_s": alone_s,
            }
        )
    return rows


def _error(forecast: float, actual: float) -> float:
    return (forecast - actual) / actual if actual else 0.0


def _summary(name: str, errors: list[float]) -> str:
    within = sum(abs(e) <= 0.25 for e in errors) / len(errors)
    return (
        f"{name}: median {statistics.median(errors):+.1%}, median |error| "
        f"{statistics.median(abs(e) for e in errors):.1%}, within 25%: {within:.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mixes", default=DEFAULT_MIXES, help=f"comma separated (default {DEFAULT_MIXES})")
    parser.add_argument("--steps", type=int, default=20, help="each pipeline's total_steps (default 20)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        f"{'mix':4s} {'pipeline':34s} {'estimate s':>10s} {'in mix s':>9s} {'err':>7s} {'est GPU-h':>9s} "
        f"{'mix GPU-h':>9s} {'err':>7s} {'idle est s':>10s} {'alone s':>8s} {'err':>7s}"
    )
    time_errors, bill_errors, idle_errors = [], [], []
    for mix in [m.strip() for m in args.mixes.split(",") if m.strip()]:
        for row in mix_rows(mix, args.steps):
            mixed = _error(row["forecast_s"], row["mixed_s"])
            billed = _error(row["forecast_gpu_h"], row["mixed_gpu_h"])
            idle = _error(row["idle_forecast_s"], row["alone_s"])
            time_errors.append(mixed)
            bill_errors.append(billed)
            idle_errors.append(idle)
            print(
                f"{row['mix']:4s} {row['pipeline'][:34]:34s} {row['forecast_s']:10.0f} {row['mixed_s']:9.0f} "
                f"{mixed:+7.1%} {row['forecast_gpu_h']:9.2f} {row['mixed_gpu_h']:9.2f} {billed:+7.1%} "
                f"{row['idle_forecast_s']:10.0f} {row['alone_s']:8.0f} {idle:+7.1%}"
            )
    print()
    print(f"{len(time_errors)} pipelines, {args.steps} steps each")
    print(_summary("estimate vs run in the mix, total time", time_errors))
    print(_summary("estimate vs run in the mix, GPU-hours ", bill_errors))
    print(_summary("idle-cluster estimate vs run alone     ", idle_errors))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
