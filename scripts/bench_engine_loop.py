"""CPU and memory of the service's simulated engine under a steady stream of jobs.

Replays what the control-plane soak asks of the engine hosted in the Celery worker, on a virtual
wall clock (no sleeping, so it runs as fast as the CPU allows): a job submitted every
1/--rate wall seconds, the controller advanced to each submit at --speed engine seconds per wall
second, and its events read every wall second as the event pump reads them (which lets the
engine forget what it keeps beyond its retention). Prints, every --every wall seconds, the CPU
spent per job so far, what the engine holds, and, with --memory, the bytes Python has allocated.

    .venv/bin/python scripts/bench_engine_loop.py --seconds 60
    .venv/bin/python scripts/bench_engine_loop.py --seconds 300 --memory   # the retention filling

It is not a test; its figures are in docs/benchmarks.md (the soak).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import tracemalloc
from dataclasses import replace

from bench_control_plane import BENCH_SPEC  # scripts/: the job the control-plane soak submits

from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.local_engine import STARTUP_S, retention_s
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.sched.registry import graph_config_for, make_scheduler
from jigsaw_engine.spec.cluster import ClusterSpec


def service_controller(nodes: int, speed: float, scheduler: str) -> ClusterController:
    """The controller as ``LocalEngine`` builds it for simulated jobs."""
    cluster = ClusterSpec(num_nodes=nodes, devices_per_node=8, device_type="h100")
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    return ClusterController(
        cluster,
        cost,
        scheduler=make_scheduler(scheduler, cluster, cost, real_pipelines=False),
        graph_config=replace(graph_config_for(scheduler), startup_s=STARTUP_S),
        estimate_verl=True,
        retain_ended_s=retention_s(speed),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="virtual wall seconds (default 60)")
    parser.add_argument("--rate", type=float, default=10.0, help="jobs submitted per wall second (default 10)")
    parser.add_argument("--speed", type=float, default=20.0, help="engine seconds per wall second (default 20)")
    parser.add_argument("--nodes", type=int, default=32, help="8-GPU nodes (default 32: the soak's 256 GPUs)")
    parser.add_argument("--scheduler", default="jigsaw", help="the service's scheduler (default jigsaw)")
    parser.add_argument("--every", type=float, default=15.0, help="wall seconds between lines (default 15)")
    parser.add_argument("--memory", action="store_true", help="trace Python allocations (about 4x slower)")
    parser.add_argument("--profile", action="store_true", help="print the top of a cProfile at the end")
    args = parser.parse_args()

    controller = service_controller(args.nodes, args.speed, args.scheduler)
    if args.memory:
        tracemalloc.start()
    profile = cProfile.Profile() if args.profile else None
    jobs, cursor, next_read, next_line = int(args.seconds * args.rate), 0, 0.0, 0.0
    started = time.process_time()
    if profile:
        profile.enable()
    for n in range(jobs):
        wall = n / args.rate
        controller.advance_to(wall * args.speed)
        controller.submit(f"job-{n}", BENCH_SPEC)
        if wall >= next_read:  # the pump: read everything new, then say so with the next cursor
            events = controller.events.since(cursor, 1_000_000)
            cursor = events[-1].seq if events else cursor
            controller.events.since(cursor, 1)
            next_read += 1.0
        if wall >= next_line or n == jobs - 1:
            cpu = time.process_time() - started
            states = controller.pipeline_states()
            held = f", {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB allocated" if args.memory else ""
            print(
                f"wall {wall:6.0f} s: {n + 1:5d} jobs, {1000 * cpu / (n + 1):5.1f} ms CPU per job; the engine knows "
                f"{len(states)} runs ({sum(s == 'running' for s in states.values())} running), "
                f"{len(controller.timeline)} timeline spans, {len(controller.events)} events{held}",
                flush=True,
            )
            next_line += args.every
    if profile:
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
