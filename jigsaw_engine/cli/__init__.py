"""``jigsaw``: validate specs and simulate workloads from the command line.

    jigsaw validate job.yaml                      # a pipeline spec, or a workload file
    jigsaw validate train.parquet --grader math   # a dataset (.jsonl, .parquet): every bad row
    jigsaw simulate --mix M0 --policies verl,verl-dedicated,verl-serial --json out.json
    jigsaw simulate --workload mix.yaml --steps 20 --seed 0 --timeline out.png
    jigsaw bench --out report/ --random 50
    jigsaw arrivals --load 0.8 --out day.yaml     # a day of jobs at a multi-tenant cluster
    jigsaw simulate --arrivals day.yaml           # every policy under the service's admission
    jigsaw run --workload examples/real-cpu.yaml --policies serial,jigsaw --json out.json

``run`` trains tiny pipelines for real on an embedded Ray (or ``RAY_ADDRESS``'s cluster).
The simulation runs the production controller and schedulers on a virtual clock; with
``--deterministic`` (no wall-clock decision latencies) the same inputs give byte-identical JSON.

Exit status: 0 done, 1 a run that failed, 2 bad input (an argument, a file, a spec), which is
named with its field path and never shown as a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jigsaw_engine.bench.mixes import MIXES, build_mix
from jigsaw_engine.bench.report import write_report
from jigsaw_engine.bench.simulate import AVAILABLE, PolicyRun, simulate_workload
from jigsaw_engine.bench.suite import SUITE_MIXES, TIMELINE_MIX, SuiteConfig, run_suite
from jigsaw_engine.bench.timeline_plot import write_timeline_png
from jigsaw_engine.cli.args import (
    UsageError,
    at_least,
    check_output_path,
    known_names,
    load_workload_arg,
    spec_error_text,
)
from jigsaw_engine.cli.arrivals import add_arrivals_parser, bench_arrivals, make_arrivals, simulate_arrivals_command
from jigsaw_engine.errors import JigsawError, PolicyError, SpecError
from jigsaw_engine.spec.workload_file import check_document, read_document
from jigsaw_engine.workload.traces import TraceError

SUITE_CONFIG = SuiteConfig()
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _print_table(result: dict[str, Any]) -> None:
    cluster = result["cluster"]
    bound_s = result["lower_bound"]["practical_s"]
    print(f"cluster: {cluster['num_devices']} x {cluster['device_type']}; practical lower bound {bound_s:.0f} s")
    print(
        f"{'policy':16s} {'tokens/s':>10s} {'steady':>10s} {'MFU':>6s} {'makespan s':>11s} {'LB ratio':>9s} "
        f"{'idle':>6s}"
    )
    for name, r in result["policies"].items():
        chosen = f"  (= {r['chosen']})" if "chosen" in r else ""
        idle = r["gpu_time_breakdown"].get("idle", 0.0)
        steady = r.get("steady_throughput_tokens_per_s")
        figures = (
            f"{r['throughput_tokens_per_s']:10.0f} {'-' if steady is None else f'{steady:.0f}':>10s} "
            f"{r['effective_mfu']:6.1%} {r['makespan_s']:11.0f} {r['lower_bound_ratio']:9.2f} {idle:6.1%}"
        )
        print(f"{name:16s} {figures}{chosen}")


class _ProgressBar:
    """Policies done out of all, on stderr: redrawn in place on a terminal, a line each otherwise."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, name: str) -> None:
        width = 24
        filled = width * done // max(1, total)
        elapsed = time.monotonic() - self._started
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name:20s} {elapsed:6.1f} s"
        end = "\n" if not self._tty or done == total else ""
        print(("\r" if self._tty else "") + line, end=end, file=sys.stderr, flush=True)


def _bench(args: argparse.Namespace) -> int:
    if args.arrivals:
        return bench_arrivals(args)
    policies = known_names("--policies", args.policies, AVAILABLE)
    mixes: tuple[str, ...] = ()
    if args.mixes or not (args.random or args.long or args.scale):  # only drawn mixes or the scaling run: none
        mixes = known_names("--mixes", args.mixes, [label for label, _, _ in SUITE_MIXES])
    at_least("--seeds", args.seeds, 1)
    at_least("--steps", args.steps, 1)
    at_least("--random", args.random, 0)
    at_least("--long", args.long, 0)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a file; give a folder for the report")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot create it: {exc.strerror or exc}") from None
    config = SuiteConfig(
        mixes=mixes,
        seeds=tuple(range(args.seeds)),
        steps=args.steps,
        policies=policies,
        random_mixes=args.random,
        long_mixes=args.long,
        scale=args.scale,
    )
    started = time.monotonic()
    timelines: list[str] = []

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    def timeline(policy: str, run: PolicyRun) -> None:
        name = f"timeline-{policy}.png"
        try:
            cluster = run.controller.cluster
            write_timeline_png(run.controller.timeline, cluster.num_devices, args.out / name,
                               title=f"{policy} on {TIMELINE_MIX}", pipeline_names=run.names)  # fmt: skip
            timelines.append(name)
        except RuntimeError as exc:  # no matplotlib: the report says so
            progress(str(exc))

    result = run_suite(config, progress, on_timeline=timeline)
    files = write_report(result, args.out, timelines)
    print((args.out / "summary.md").read_text())
    print(f"wrote {len(files)} files to {args.out} in {time.monotonic() - started:.0f} s")
    return EXIT_OK


def _timeline_path(base: Path, policy: str, count: int) -> Path:
    """``--timeline out.png``: that file for one policy, ``out-<policy>.png`` for several."""
    return base if count == 1 else base.with_name(f"{base.stem}-{policy}{base.suffix or '.png'}")


def _run_real(args: argparse.Namespace) -> int:
    """``jigsaw run``: imported lazily, so the planning commands never load torch or Ray."""
    try:
        from jigsaw_engine.cli.run import run_command
    except ModuleNotFoundError as exc:
        raise UsageError(f"jigsaw run needs {exc.name}: pip install 'jigsawrl[rl,ray]'") from None
    return run_command(args)


def _validate(args: argparse.Namespace) -> int:
    if args.spec.suffix in DATASET_SUFFIXES:
        return _validate_dataset(args.spec, args.grader)
    if args.grader is not None:
        raise UsageError(f"--grader: only with a dataset file ({' or '.join(DATASET_SUFFIXES)})")
    try:
        what = check_document(read_document(args.spec))
    except SpecError as exc:
        raise UsageError(spec_error_text(str(args.spec), exc)) from None
    print(f"{args.spec}: ok ({what})")
    return EXIT_OK


DATASET_SUFFIXES = (".jsonl", ".parquet")
DATASET_PROBLEMS_SHOWN = 50


def _validate_dataset(path: Path, grader: str | None) -> int:
    """A training dataset checked as a job will read it (``data.train_files``, ``data.grader``)."""
    from jigsaw_engine.api import check_dataset_text

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        found = check_dataset_text(data, str(path), grader=grader, max_problems=DATASET_PROBLEMS_SHOWN)
    except SpecError as exc:
        raise UsageError("\n".join(f"--{e.field}: {e.message}" for e in exc.errors)) from None
    if found.problem_count:
        n = found.problem_count
        lines = [f"{path}: {n} bad row{'s' if n != 1 else ''}"]
        lines += [f"  {p.message}" if p.field == "rows" else f"  {path}: {p.message}" for p in found.problems]
        if n > len(found.problems):
            lines.append(f"  and {n - len(found.problems)} more")
        raise UsageError("\n".join(lines))
    graded = f", answers fit the {grader} grader" if grader else ""
    print(f"{path}: ok ({found.row_count} rows, {found.format}{graded})")
    return EXIT_OK


def _simulate(args: argparse.Namespace) -> int:
    if args.arrivals is not None:
        return simulate_arrivals_command(args)
    if args.plot is not None:
        raise UsageError("--plot: only with --arrivals; --timeline draws a workload's run")
    policies = list(known_names("--policies", args.policies or "verl", AVAILABLE))
    at_least("--steps", args.steps, 1)
    at_least("--seed", args.seed, 0)
    for flag, path in (("--json", args.json), ("--timeline", args.timeline)):
        if path is not None:
            check_output_path(flag, path)
    if args.mix:
        try:
            workload = build_mix(args.mix, variant=args.variant)
        except SpecError as exc:  # an unknown variant: its field is the flag's name
            raise UsageError("\n".join(f"--{e.field}: {e.message}" for e in exc.errors)) from None
    else:
        if args.variant is not None:
            raise UsageError("--variant: only with --mix; a workload file says its own cluster")
        workload = load_workload_arg(args.workload)
    runs: dict[str, PolicyRun] = {}
    result = simulate_workload(
        workload,
        policies,
        steps=args.steps,
        seed=args.seed,
        timing=not args.deterministic,
        progress=_ProgressBar(),
        on_run=runs.__setitem__ if args.timeline else lambda name, run: None,
    )
    _print_table(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if args.timeline is not None:
        for policy, figures in result["policies"].items():
            run = runs[figures.get("chosen", policy)]
            path = _timeline_path(args.timeline, policy, len(result["policies"]))
            title = f"{policy}: {workload.cluster.num_devices} x {workload.cluster.device_type}"
            write_timeline_png(run.controller.timeline, workload.cluster.num_devices, path, title=title,
                               pipeline_names=run.names)  # fmt: skip
            print(f"timeline: {path}")
    return EXIT_OK


COMMANDS = {"validate": _validate, "simulate": _simulate, "bench": _bench, "run": _run_real, "arrivals": make_arrivals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jigsaw", description="JigsawRL engine tools")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser(
        "validate", help="check a pipeline spec or a workload file (YAML or JSON) and list every problem"
    )
    v.add_argument("spec", type=Path)
    v.add_argument("--grader", help="with a dataset file (.jsonl, .parquet): check each answer suits this grader")
    s = sub.add_parser("simulate", help="simulate a workload on a virtual clock under several policies")
    source = s.add_mutually_exclusive_group(required=True)
    source.add_argument("--workload", type=Path, help="YAML/JSON file with a cluster and pipelines")
    source.add_argument("--mix", choices=sorted(MIXES), help="a built-in mix (docs/benchmarks.md)")
    source.add_argument(
        "--arrivals", type=Path, help="an arrivals file (jigsaw arrivals): a day of jobs under the service's admission"
    )
    s.add_argument("--variant", default=None, help="a mix's variant (e.g. M0: 16xa100; M5: areal)")
    s.add_argument(
        "--policies",
        default=None,
        help="comma separated (default verl; with --arrivals verl-dedicated,greedy,jigsaw); "
        f"available: {', '.join(AVAILABLE)}",
    )
    s.add_argument("--steps", type=int, default=None, help="override every pipeline's trainer.total_steps")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", type=Path, default=None, help="write the results here")
    s.add_argument("--deterministic", action="store_true", help="leave out wall-clock decision latencies")
    s.add_argument(
        "--timeline", type=Path, default=None, help="write a Gantt chart PNG of each policy's run (needs matplotlib)"
    )
    s.add_argument(
        "--plot", type=Path, default=None, help="with --arrivals: the queue and utilisation over the day, as a PNG"
    )
    add_arrivals_parser(sub)
    b = sub.add_parser("bench", help="every policy on every built-in mix over seeds: a report folder")
    b.add_argument("--out", type=Path, required=True, help="report folder (summary.md, results.json, plots)")
    b.add_argument("--mixes", default=",".join(SUITE_CONFIG.mixes), help="comma separated suite mixes")
    b.add_argument("--seeds", type=int, default=len(SUITE_CONFIG.seeds), help="seeds 0..N-1 per mix")
    b.add_argument("--steps", type=int, default=SUITE_CONFIG.steps)
    b.add_argument("--policies", default=",".join(SUITE_CONFIG.policies))
    b.add_argument("--random", type=int, default=0, help="also score jigsaw on N random mixes")
    b.add_argument("--long", type=int, default=0, help="also score jigsaw on N long-response mixes")
    b.add_argument("--scale", action="store_true", help="also time decisions at 1024 GPUs x 64 pipelines")
    b.add_argument(
        "--arrivals",
        action="store_true",
        help="only a day of arrivals at 60/80/100%% load, under the service's admission",
    )
    r = sub.add_parser("run", help="train a workload's tiny pipelines for real, policies side by side")
    r.add_argument("--workload", type=Path, required=True, help="YAML/JSON file: a cpu cluster and tiny pipelines")
    r.add_argument("--policies", default="jigsaw", help="comma separated: serial, dedicated, greedy, jigsaw")
    r.add_argument("--steps", type=int, default=None, help="override every pipeline's trainer.total_steps")
    r.add_argument("--json", type=Path, default=None, help="write the results here")
    r.add_argument(
        "--executor",
        choices=("ray", "ray-split", "threads"),
        default="ray",
        help="ray: an actor process per pipeline (default); ray-split: and one per rollout worker and one for "
        "the environment, as the service runs them; threads: all in this process",
    )
    r.add_argument(
        "--rollout-engine",
        choices=("torch", "vllm"),
        default=None,
        help="the workers' rollout engine (default: vllm when a pipeline names a real checkpoint and vLLM is "
        "installed, else torch, which runs tiny presets faster)",
    )
    r.add_argument(
        "--train-across-devices",
        action="store_true",
        help="on Ray, a pipeline asking several cores trains on a process per core with FSDP2 (gloo) instead of "
        "torch threads in one process; slower for tiny models here, the default on GPU clusters",
    )
    r.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "jigsaw-tiny-policies",
        help="where warmed-up start policies are kept between runs",
    )
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TraceError as exc:  # a trace that is missing or not in its documented shape
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PolicyError as exc:
        print(f"error: --policies: {exc}; leave it out for this workload", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # writing --json or --timeline: checked before the run, yet it can fail
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except JigsawError as exc:  # a pipeline that failed in the simulator
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
