"""Measure how much two rollout workers of one real job overlap when they are threads of one process.

    .venv/bin/python scripts/measure_rollout_threads.py [--workload examples/real-cpu.yaml]
        [--steps 10] [--write]

A real job's torch rollout engines are threads of its pipeline actor, one per core it was
given. Python runs one thread at a time: what holds the interpreter's lock (torch dispatch
of a tiny model's small kernels, sampling, each episode's turns and tool calls) runs one
worker at a time, and only the kernels run side by side. This script builds each pipeline of
the workload with two workers and runs its steps' rollouts alternately:

- one after the other, both workers on one core;
- at once, each worker's thread pinned to a core of its own.

Steps differ in what they generate, so each is timed per token of the step's sequences.
With ``T`` a worker's time alone, two at once take ``(2 - f) T`` (Amdahl's law across
workers), so ``f = 2 - 2 * at_once / one_after_the_other`` per token. The script prints both
rates and ``f`` per pipeline, and the median over every pair of steps, which ``--write``
stores as ``rollout_threads_parallel_fraction`` in the CPU profile. Needs two cores; the
pipelines' warmed-up tiny policies are cached in ``--cache-dir`` (built on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path

import torch

from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.runtime.host_allocator import keep_freed_memory
from jigsaw_engine.runtime.profile_fit import amdahl_fraction
from jigsaw_engine.spec.pipeline import ResourceSpec, parse_pipeline_spec
from jigsaw_engine.spec.workload_file import load_workload_file

PROFILE = Path(__file__).resolve().parents[1] / "jigsaw_engine" / "cost" / "profiles" / "cpu.json"
WORKERS = 2


def _rollouts(job: object, cores: list[int]) -> float:
    """Seconds of the open step's rollout on ``cores`` (one: the workers in turn on it; two:
    each worker's thread pinned to its own, at once)."""

    def run(worker: int, core: int) -> None:
        os.sched_setaffinity(0, {core})  # 0: the calling thread
        job.rollout(worker)  # type: ignore[attr-defined]

    started = time.perf_counter()
    if len(cores) == 1:
        for worker in range(WORKERS):
            run(worker, cores[0])
    else:
        threads = [threading.Thread(target=run, args=(w, cores[w])) for w in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return time.perf_counter() - started


def measure(spec_raw: dict[str, object], steps: int, cores: list[int], cache_dir: Path) -> tuple[list[float], str]:
    spec = parse_pipeline_spec(spec_raw)
    spec = replace(spec, resources=ResourceSpec(num_gpus=WORKERS, tp=1))
    job = build_real_pipeline(spec, train_parts=1, options=RealJobOptions(cache_dir=cache_dir)).job
    per_token: dict[str, list[float]] = {"one after the other": [], "at once": []}
    for step in range(steps + 1):
        mode = "one after the other" if step % 2 == 0 else "at once"
        job.begin_step(WORKERS)
        seconds = _rollouts(job, cores[:1] if mode == "one after the other" else cores[:WORKERS])
        os.sched_setaffinity(0, set(cores))
        job.score()
        job.old_log_probs()
        job.ref_log_probs()
        job.train(1, 1)
        job.sync_weights()
        tokens = sum(p.total_tokens for p in job.step_plans[step])
        if step > 0:  # the first is a warm-up
            per_token[mode].append(seconds / tokens)
    pairs = zip(per_token["one after the other"], per_token["at once"], strict=False)
    fractions = [amdahl_fraction(serial, together) for serial, together in pairs]
    serial_us = statistics.median(per_token["one after the other"]) * 1e6
    together_us = statistics.median(per_token["at once"]) * 1e6
    line = (
        f"{spec.name:16s} one after the other {serial_us:6.1f} us/token, at once {together_us:6.1f} us/token:"
        f" parallel fraction {statistics.median(fractions):.2f} ({min(fractions):.2f}-{max(fractions):.2f})"
    )
    return fractions, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Path, default=Path("examples/real-cpu.yaml"))
    parser.add_argument("--steps", type=int, default=10, help="steps per pipeline, alternating the two ways")
    parser.add_argument("--cache-dir", type=Path, default=Path("var/real-cache"))
    parser.add_argument("--write", action="store_true", help="store the median into the CPU profile")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < WORKERS:
        raise SystemExit(f"needs {WORKERS} cores, this process may use {len(cores)}")
    torch.set_num_threads(1)
    keep_freed_memory()  # as a pipeline actor does: its threads' heaps are not faulted in again
    fractions: list[float] = []
    for raw in load_workload_file(args.workload).pipelines:
        found, line = measure(raw, args.steps, cores, args.cache_dir)
        fractions += found
        print(line, flush=True)
    median = float(f"{statistics.median(fractions):.3g}")
    print(f"rollout_threads_parallel_fraction {median} (median of {len(fractions)} pairs of steps)")
    if args.write:
        profile = json.loads(PROFILE.read_text())
        profile["rollout_threads_parallel_fraction"] = median
        PROFILE.write_text(json.dumps(profile, indent=2) + "\n")
        print(f"wrote {PROFILE}")


if __name__ == "__main__":
    main()
