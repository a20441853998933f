"""``jigsaw run``: real pipelines on the embedded Ray, a live line per pipeline, JSON out.

Ray starts embedded unless ``RAY_ADDRESS`` is set (then it joins that cluster); this module is
a CLI entry point, so it is the one place here that reads the environment.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from jigsaw_engine.cli.args import (
    UsageError,
    at_least,
    check_output_path,
    known_names,
    load_workload_arg,
    spec_error_text,
)
from jigsaw_engine.errors import JigsawError, SpecError
from jigsaw_engine.models.compute import resolve_compute_device
from jigsaw_engine.real.jobs import RealJobOptions, RolloutEngineName, rollout_engine_for
from jigsaw_engine.real.real_runtime import NodeExecutor, ThreadExecutor
from jigsaw_engine.real.run import (
    REAL_POLICIES,
    ExecutorFactory,
    RealPolicy,
    check_real_workload,
    run_real_workload,
)
from jigsaw_engine.runtime.machine_speed import reference_seconds
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.workload_file import WorkloadFile

logger = logging.getLogger(__name__)


class LiveProgress:
    """One line per pipeline: steps done of total, redrawn in place on a terminal."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._started = time.monotonic()
        self._last: dict[str, tuple[int, int]] = {}
        self._drawn = 0

    def __call__(self, policy: str, done: Mapping[str, tuple[int, int]]) -> None:
        if dict(done) == self._last:
            return
        self._last = dict(done)
        lines = []
        for pid, (steps, total) in done.items():
            bar = "#" * (20 * steps // max(1, total))
            lines.append(
                f"{policy:10s} {pid:24s} [{bar:20s}] {steps}/{total} steps  {time.monotonic() - self._started:6.1f} s"
            )
        if self._tty and self._drawn:
            sys.stderr.write(f"\x1b[{self._drawn}F")
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        self._drawn = len(lines) if self._tty else 0


def _executor_factory(kind: str, options: RealJobOptions) -> ExecutorFactory:
    """Ray actors (one process per pipeline) or threads of this process."""

    def threads(specs: Mapping[str, Mapping[str, Any]], train_parts: int, cluster: ClusterSpec) -> NodeExecutor:
        from jigsaw_engine.real.jobs import build_real_pipeline

        pipelines = {
            pid: build_real_pipeline(parse_pipeline_spec(s), train_parts=train_parts, options=options)
            for pid, s in specs.items()
        }
        return ThreadExecutor(pipelines)

    def actors(specs: Mapping[str, Mapping[str, Any]], train_parts: int, cluster: ClusterSpec) -> NodeExecutor:
        from jigsaw_engine.real.pipeline_actor import RayExecutor

        # The run's cores are reserved from Ray for as long as its executor lives.
        return RayExecutor(specs, train_parts=train_parts, options=options, cluster=cluster)

    return actors if kind.startswith("ray") else threads


def _start_ray() -> None:
    import ray

    from jigsaw_engine.runtime.ray.placement import EMBEDDED_RAY_SYSTEM_CONFIG

    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, namespace="jigsaw", log_to_driver=False)
        return
    ray.init(
        object_store_memory=256 * 2**20,
        include_dashboard=False,
        namespace="jigsaw",
        log_to_driver=False,
        _temp_dir=os.path.join(tempfile.gettempdir(), "jrr"),
        _system_config=EMBEDDED_RAY_SYSTEM_CONFIG,
    )


FORECAST_TARGET = 0.15
"""How close the simulator's step time should come to a real run's. The summary says how many
pipeline runs it reached, and how many of those where the machine's speed held within as much
from before the run to after (on a shared host it moves by more, and the forecast with it)."""


def _print_summary(result: dict[str, Any]) -> None:
    print(f"{'policy':10s} {'tokens/s':>9s} {'makespan s':>11s} {'max latency x':>14s} {'sim makespan s':>15s}")
    for name, figures in result["policies"].items():
        ratios = [p.get("latency_ratio_vs_alone", float("nan")) for p in figures["pipelines"].values()]
        chosen = f"  (= {figures['chosen']})" if "chosen" in figures else ""
        rate, makespan = figures["throughput_tokens_per_s"], figures["makespan_s"]
        predicted = figures["predicted_makespan_s"]
        print(f"{name:10s} {rate:9.0f} {makespan:11.1f} {max(ratios):14.2f} {predicted:15.1f}{chosen}")
    print(
        "\nsimulator forecast per pipeline: step latency error (at the profile's speed), and sim/real"
        " seconds by sub-stage; first the machine's slowdown against its profile, timed before and"
        " after the run (! where the two differ by more than the forecast's target)"
    )
    judged: list[tuple[bool, bool]] = []  # (within the target, the machine held its speed)
    for name, figures in result["policies"].items():
        if name == "verl":
            continue  # a copy of serial or dedicated
        for pid, f in figures["pipelines"].items():
            real, sim = f["stage_seconds"]["real"], f["stage_seconds"]["predicted"]
            kinds = sorted(set(real) | set(sim), key=lambda k: -real.get(k, 0.0))
            stages = "  ".join(f"{k} {sim.get(k, 0.0):.1f}/{real.get(k, 0.0):.1f}" for k in kinds)
            errors = f"{f['prediction_error']:+6.0%} ({f['prediction_error_at_profile_speed']:+4.0%})"
            low, high = f["machine_slowdown_range"]
            steady = high <= low * (1 + FORECAST_TARGET)
            judged.append((abs(f["prediction_error"]) <= FORECAST_TARGET, steady))
            speed = f"x{f['machine_slowdown']:.2f} ({low:.2f}-{high:.2f}){' ' if steady else '!'}"
            print(f"{name:10s} {speed} {pid:18s} {errors}  {stages}")
    steady_runs = [within for within, steady in judged if steady]
    print(
        f"forecast within {FORECAST_TARGET:.0%}: {sum(w for w, _ in judged)} of {len(judged)} pipeline runs;"
        f" {sum(steady_runs)} of the {len(steady_runs)} where the machine held its speed"
    )


def _default_rollout_engine(workload: WorkloadFile) -> RolloutEngineName:
    """One engine for the whole run (the forecast models one): vLLM when any pipeline trains a
    real checkpoint, as a job alone would get (:func:`~jigsaw_engine.real.jobs.rollout_engine_for`),
    and on a GPU cluster where this host has CUDA."""
    on_gpus = workload.cluster.device_type != "cpu"
    options = RealJobOptions(on_gpus=on_gpus, compute=resolve_compute_device().kind if on_gpus else "cpu")
    engines = {rollout_engine_for(parse_pipeline_spec(raw), options) for raw in workload.pipelines}
    return "vllm" if "vllm" in engines else "torch"


def run_command(args: argparse.Namespace) -> int:
    """``jigsaw run``; bad input raises :class:`UsageError` before Ray starts or any work is done."""
    policies = known_names("--policies", args.policies, REAL_POLICIES)
    at_least("--steps", args.steps, 1)
    if args.json is not None:
        check_output_path("--json", args.json)
    workload = load_workload_arg(args.workload)
    use_ray = args.executor.startswith("ray")
    try:
        check_real_workload(workload, steps=args.steps, on_ray=use_ray)
    except SpecError as exc:
        raise UsageError(spec_error_text(f"--workload {args.workload}", exc)) from None
    engine = args.rollout_engine or _default_rollout_engine(workload)
    if use_ray:
        _start_ray()
    try:
        chosen: list[RealPolicy] = [p for p in REAL_POLICIES if p in policies]
        result = run_real_workload(
            workload,
            chosen,
            make_executor=_executor_factory(
                args.executor,
                RealJobOptions(
                    cache_dir=args.cache_dir,
                    rollout_engine=engine,
                    # A torch engine is a copy of a tiny model: one per core lets a step run on
                    # every core. vLLM engines each reserve a KV cache: only what was asked.
                    rollout_workers=workload.cluster.num_devices if engine == "torch" else 1,
                    worker_actors=args.executor == "ray-split",
                    train_across_devices=args.train_across_devices,
                ),
            ),
            steps=args.steps,
            prefix_cache=engine == "vllm",
            # A job's engines are threads of the pipeline's actor (or of this process), unless
            # each rollout worker has an actor of its own: torch engines hold the interpreter's
            # lock by turns, vLLM's in-process engine cores one lock for every engine call.
            workers_share_process=args.executor != "ray-split",
            progress=LiveProgress(),
            machine_speed=reference_seconds,
            rollout_engine=engine,
        )
    except (JigsawError, RuntimeError) as exc:  # a sub-stage failed, or a pipeline did not finish
        logger.error("real run failed", exc_info=True)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if use_ray:
            import ray

            ray.shutdown()
    _print_summary(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
