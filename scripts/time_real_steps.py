"""Time each phase of a workload's real tiny pipelines, in this process, on one pinned core.

    .venv/bin/python scripts/time_real_steps.py --workload examples/real-cpu.yaml [--steps 3]
        [--micro-batch-overhead-tokens 32|none]

What ``jigsaw run`` reports per sub-stage includes its executor's hand-offs and whatever runs
beside it; this is the work alone (rollout, old and reference log-probs, the update), the
baseline a forecast or a trainer change is judged against. The first step of each pipeline is
a warm-up and is not counted.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

import jigsaw_engine.runtime.real_jobs as real_jobs
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.workload_file import load_workload_file


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

    print(f"{'pipeline':16s} {'rollout s':>10s} {'forwards s':>11s} {'train s':>8s}   ({args.steps} steps)")
    for raw in load_workload_file(args.workload).pipelines:
        spec = parse_pipeline_spec(raw)
        options = real_jobs.RealJobOptions(cache_dir=args.cache_dir)
        job = real_jobs.build_real_pipeline(spec, train_parts=1, options=options).job
        trainers: list[Any] = [job.trainer, job.critic] if job.critic is not None else [job.trainer]
        for trainer in trainers:  # the trainers read their config at every call
            trainer.config = replace(trainer.config, micro_batch_overhead_tokens=overhead)
        totals = [0.0, 0.0, 0.0]
        for step in range(args.steps + 1):
            t0 = time.perf_counter()
            job.begin_step()
            for worker in range(job.step_workers):
                job.rollout(worker)
            job.score()
            t1 = time.perf_counter()
            job.old_log_probs()
            job.ref_log_probs()
            t2 = time.perf_counter()
            job.train(1, 1)
            t3 = time.perf_counter()
            job.sync_weights()
            if step > 0:
                for i, seconds in enumerate((t1 - t0, t2 - t1, t3 - t2)):
                    totals[i] += seconds
        print(f"{spec.name:16s} {totals[0]:10.3f} {totals[1]:11.3f} {totals[2]:8.3f}")


if __name__ == "__main__":
    main()
