"""Time each phase of a workload's real tiny pipelines, in this process, on one pinned core,
beside the simulator's forecast of the same sequences.

    .venv/bin/python scripts/time_real_steps.py --workload examples/real-cpu.yaml [--steps 3]
        [--micro-batch-overhead-tokens 32|none]

What ``jigsaw run`` reports per sub-stage includes its executor's hand-offs and whatever runs
beside it; this is the work alone (rollout, old and reference log-probs, the update), the
baseline a forecast or a trainer change is judged against. The first step of each pipeline is
a warm-up and is not counted.

The forecast replays the steps' recorded sequences through the simulator (the ``dedicated``
policy on one core, the profile scaled by the machine's slowdown timed before and after each
pipeline, as ``jigsaw run`` does): ``plain/forecast`` per phase is the cost model's own error,
and what a ``jigsaw run`` shows beyond it is the runtime's.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

import jigsaw_engine.real.jobs as real_jobs
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.real.run import predict_with_simulator, real_graph
from jigsaw_engine.runtime.machine_speed import reference_seconds, slowdown_range
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.workload_file import load_workload_file

TORCH_ENGINE_GRAPH = real_graph("dedicated", prefix_cache=False, workers_share_process=True)
"""The graph ``jigsaw run`` forecasts the torch engine with: no prefix cache (a turn after
feedback or a tool call prefills the whole conversation again), workers threads of one process."""

PHASES = ("rollout", "old_logprob", "ref_logprob", "train")
"""The phases timed, named as the simulator's sub-stages (its rollout sums prefill, decode and
tool waits; scoring is timed with the rollout and forecast apart, as ``reward``)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3, help="steps timed per pipeline (after one warm-up step)")
    parser.add_argument(
        "--micro-batch-overhead-tokens",
        default=str(real_jobs.TINY_MICRO_BATCH_OVERHEAD_TOKENS),
        help="the trainer's micro-batch cost in tokens, or 'none' for the fewest micro-batches",
    )
    parser.add_argument("--cache-dir", type=Path, default=Path("var/real-cache"), help="warmed-up tiny policies")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    torch.set_num_threads(1)
    overhead = None if args.micro_batch_overhead_tokens == "none" else int(args.micro_batch_overhead_tokens)
    workload = load_workload_file(args.workload)
    reference_s = load_device_profile(workload.cluster.device_type).reference_s

    print(f"seconds over {args.steps} steps, plain run / forecast (the machine's slowdown before-after)")
    print(f"{'pipeline':16s} {'slowdown':>11s} " + " ".join(f"{p:>17s}" for p in PHASES))
    for raw in workload.pipelines:
        raw = {**raw, "resources": {**dict(raw.get("resources", {})), "num_gpus": 1}}
        raw = {**raw, "trainer": {**dict(raw.get("trainer", {})), "total_steps": args.steps + 1}}
        spec = parse_pipeline_spec(raw)
        options = real_jobs.RealJobOptions(cache_dir=args.cache_dir)
        job = real_jobs.build_real_pipeline(spec, train_parts=1, options=options).job
        trainers: list[Any] = [job.trainer, job.critic] if job.critic is not None else [job.trainer]
        for trainer in trainers:  # the trainers read their config at every call
            trainer.config = replace(trainer.config, micro_batch_overhead_tokens=overhead)
        before_s = reference_seconds() if reference_s else 0.0
        plain = _time_steps(job, args.steps)
        after_s = reference_seconds() if reference_s else 0.0
        timed = slowdown_range(before_s, after_s, reference_s)
        forecast = predict_with_simulator(
            workload.cluster,
            "dedicated",
            {spec.name: raw},
            {spec.name: dict(job.step_plans)},
            graph_config=TORCH_ENGINE_GRAPH,
            slowdown=sum(timed) / 2,
            from_step=1,
        )["stages"][spec.name]
        cells = [_cell(plain[p], forecast.get(p, 0.0)) for p in PHASES]
        print(f"{spec.name:16s} {timed[0]:5.2f}-{timed[1]:4.2f} " + " ".join(cells))


def _time_steps(job: Any, steps: int) -> dict[str, float]:
    totals = dict.fromkeys(PHASES, 0.0)
    for step in range(steps + 1):
        marks = [time.perf_counter()]
        job.begin_step()
        for worker in range(job.step_workers):
            job.rollout(worker)
        job.score()
        marks.append(time.perf_counter())
        job.old_log_probs()
        marks.append(time.perf_counter())
        job.ref_log_probs()
        marks.append(time.perf_counter())
        job.train(1, 1)
        marks.append(time.perf_counter())
        job.sync_weights()
        if step > 0:
            for phase, (start, end) in zip(PHASES, itertools.pairwise(marks), strict=True):
                totals[phase] += end - start
    return totals


def _cell(plain: float, forecast: float) -> str:
    ratio = f"x{plain / forecast:.2f}" if forecast > 0 else "-"
    return f"{plain:6.2f}/{forecast:4.2f} {ratio:>5s}"


if __name__ == "__main__":
    main()
