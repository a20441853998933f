"""How long the simulator takes at scale (issue 38, item 3), policy by policy.

The comparison: M5's four async pipelines three times over (12 pipelines, copy ``k`` with
seeds ``+ 100 k``) on 16 x 8 H100, 10 steps, under the seven policies a user compares (the
three composites verl, streamrl and areal, each the better of its dedicated and serial
deployments, then rollmux, muxserve, jigsaw and greedy). The scale case: ``jigsaw`` alone on
1,024 GPUs x 64 pipelines x 10 steps (``run_scale`` of ``jigsaw bench --scale``).

    .venv/bin/python scripts/bench_sim_scale.py                      # the comparison
    .venv/bin/python scripts/bench_sim_scale.py --exhaustive         # as before pruning
    .venv/bin/python scripts/bench_sim_scale.py --policies areal-serial --profile p.out
    .venv/bin/python scripts/bench_sim_scale.py --scale              # jigsaw at 1,024 GPUs

Prints each run's wall and CPU seconds and the load average when it ended (the host is
shared: compare figures of one invocation, or of invocations at a similar load). ``--json``
writes the deterministic report (``jigsaw simulate --deterministic --json``'s), to compare
byte for byte. It is not a test; its figures are in docs/benchmarks.md ("Simulator speed").
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from pathlib import Path
from typing import Any

from jigsaw_engine.bench.mixes import mix_document
from jigsaw_engine.bench.simulate import simulate_workload
from jigsaw_engine.bench.suite import run_scale
from jigsaw_engine.spec.workload_file import WorkloadFile, parse_workload

SEVEN = "verl,streamrl,areal,rollmux,muxserve,jigsaw,greedy"


def twelve_pipelines(copies: int = 3, nodes: int = 16) -> WorkloadFile:
    """M5 ``copies`` times over on ``nodes`` 8-GPU nodes, each copy with its own seeds."""
    doc = mix_document("M5")
    doc["cluster"]["num_nodes"] = nodes
    doc["pipelines"] = [
        {**p, "name": f"{p['name']}-{k}", "seed": p["seed"] + 100 * k} for k in range(copies) for p in doc["pipelines"]
    ]
    return parse_workload(doc)


class Clock:
    """Wall and CPU seconds of each phase, printed as each ends."""

    def __init__(self) -> None:
        self.phase = "setup (alone latencies, lower bound)"
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        self.rows: list[tuple[str, float, float]] = []

    def next(self, phase: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.rows.append((self.phase, wall - self.wall, cpu - self.cpu))
        print(
            f"{self.phase:40s} {wall - self.wall:8.1f} s wall {cpu - self.cpu:8.1f} s CPU  load {_load()}", flush=True
        )
        self.phase, self.wall, self.cpu = phase, wall, cpu


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def compare(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock()
    result = simulate_workload(
        twelve_pipelines(),
        args.policies.split(","),
        steps=args.steps,
        seed=args.seed,
        timing=False,
        **({"exhaustive": True} if args.exhaustive else {}),  # before pruning: not a parameter
        progress=lambda done, total, name: clock.next(name),
    )
    total_wall = sum(r[1] for r in clock.rows)
    total_cpu = sum(r[2] for r in clock.rows)
    print(f"{'total':40s} {total_wall:8.1f} s wall {total_cpu:8.1f} s CPU  load {_load()}")
    for name, figures in result["policies"].items():
        chosen = f" ({figures['chosen']})" if "chosen" in figures else ""
        print(f"  {name + chosen:32s} {figures['throughput_tokens_per_s']:10.1f} tokens/s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default=SEVEN, help=f"comma separated (default {SEVEN})")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exhaustive", action="store_true", help="every baseline layout simulated (no pruning)")
    parser.add_argument("--scale", action="store_true", help="jigsaw alone at 1,024 GPUs x 64 pipelines instead")
    parser.add_argument("--json", type=Path, help="write the deterministic report here")
    parser.add_argument("--profile", type=Path, help="write a cProfile here and print its top")
    args = parser.parse_args()
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    if args.scale:
        started = time.process_time()
        figures = run_scale(devices=1024, replicas=8, steps=args.steps)
        figures["cpu_s"] = time.process_time() - started
        print(json.dumps(figures, indent=2), f"\nload {_load()}")
    else:
        result = compare(args)
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
        pstats.Stats(str(args.profile)).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
