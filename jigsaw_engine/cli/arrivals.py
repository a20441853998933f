"""``jigsaw simulate --arrivals FILE`` and ``jigsaw arrivals``: the cluster as a service for a day.

jigsaw arrivals --load 0.8 --seed 0 --out day.yaml     # draw a day of jobs at 80% load
jigsaw simulate --arrivals day.yaml --json out.json    # every policy under the same admission
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from jigsaw_engine.bench.arrivals_file import load_arrivals_file
from jigsaw_engine.bench.arrivals_gen import ArrivalsConfig, generate_arrivals
from jigsaw_engine.bench.arrivals_plot import write_arrivals_png
from jigsaw_engine.bench.arrivals_report import arrivals_table, simulate_arrivals
from jigsaw_engine.bench.arrivals_suite import run_arrivals_suite
from jigsaw_engine.bench.service_sim import ARRIVAL_POLICIES
from jigsaw_engine.cli.args import UsageError, check_output_path, known_names, spec_error_text
from jigsaw_engine.errors import SpecError

DEFAULT_ARRIVAL_POLICIES = "verl-dedicated,greedy,jigsaw"


def add_arrivals_parser(sub: Any) -> None:
    a = sub.add_parser("arrivals", help="draw a day of jobs arriving at a multi-tenant cluster (an arrivals file)")
    defaults = ArrivalsConfig()
    a.add_argument("--out", type=Path, required=True, help="the file to write (.yaml, or .json)")
    a.add_argument("--load", type=float, default=defaults.load, help="offered load, e.g. 0.6, 0.8, 1.0")
    a.add_argument("--seed", type=int, default=defaults.seed)
    a.add_argument("--tenants", type=int, default=defaults.tenants, help="3 to 5")
    a.add_argument("--nodes", type=int, default=defaults.num_nodes, help="nodes of 8 H100s")
    a.add_argument("--day-s", type=float, default=defaults.day_s, help="the day's length (86400: a real day)")


def make_arrivals(args: argparse.Namespace) -> int:
    check_output_path("--out", args.out)
    if not 0.0 < args.load <= 2.0:
        raise UsageError(f"--load: must be in (0, 2], got {args.load}")
    if not 3 <= args.tenants <= 5:
        raise UsageError(f"--tenants: must be 3 to 5, got {args.tenants}")
    if args.nodes < 1:
        raise UsageError(f"--nodes: must be >= 1, got {args.nodes}")
    if not (math.isfinite(args.day_s) and args.day_s >= 60.0):
        raise UsageError(f"--day-s: must be >= 60, got {args.day_s}")
    config = ArrivalsConfig(
        num_nodes=args.nodes, day_s=args.day_s, load=args.load, tenants=args.tenants, seed=args.seed
    )
    doc = generate_arrivals(config)
    text = json.dumps(doc, indent=2) + "\n" if args.out.suffix == ".json" else yaml.safe_dump(doc, sort_keys=False)
    args.out.write_text(text)
    print(f"{args.out}: {len(doc['jobs'])} jobs, offered load {doc['source']['offered_load']:.2f}")
    return 0


def simulate_arrivals_command(args: argparse.Namespace) -> int:
    policies = list(known_names("--policies", args.policies or DEFAULT_ARRIVAL_POLICIES, ARRIVAL_POLICIES))
    for flag in ("steps", "variant", "timeline"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag}: not with --arrivals; the file says each job's steps and the cluster")
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            check_output_path(flag, path)
    try:
        arrivals = load_arrivals_file(args.arrivals)
    except SpecError as exc:
        raise UsageError(spec_error_text(f"--arrivals {args.arrivals}", exc)) from None
    result, runs = simulate_arrivals(arrivals, policies)
    cluster = result["cluster"]
    print(
        f"cluster: {cluster['num_devices']} x {cluster['device_type']}; {result['jobs']} jobs "
        f"({result['steps']} steps) over a day of {result['day_s']:.0f} s; offered load {result['offered_load']:.2f}"
    )
    print("\n".join(arrivals_table(result)))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if args.plot is not None:
        try:
            title = f"{args.arrivals.name}: {cluster['num_devices']} x {cluster['device_type']}"
            write_arrivals_png(runs, arrivals.cluster.num_devices, arrivals.day_s, args.plot, title=title)
        except RuntimeError as exc:  # no matplotlib
            raise UsageError(str(exc)) from None
        print(f"plot: {args.plot}")
    return 0


def bench_arrivals(args: argparse.Namespace) -> int:
    """``jigsaw bench --arrivals --out DIR``: the day at each load, its table and pictures."""
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a file; give a folder for the report")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    files = run_arrivals_suite(args.out, progress=progress)
    print((args.out / "arrivals.md").read_text())
    print(f"wrote {len(files)} files to {args.out} in {time.monotonic() - started:.0f} s")
    return 0
