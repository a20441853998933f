"""``jigsaw``: validate specs and simulate workloads from the command line.

    jigsaw validate job.yaml
    jigsaw simulate --workload mix.yaml [--steps 20] [--seed 0] [--json out.json]

The simulation runs the production controller on a virtual clock (deterministic: the same
inputs give byte-identical JSON). Placement policy available now: ``dedicated`` (each
pipeline on its own devices, first come first served).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from jigsaw_engine.contracts import EventKind
from jigsaw_engine.control.controller import Controller
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.errors import SpecError
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.workload_file import WorkloadFile, load_workload_file

POLICIES = ("dedicated",)


def simulate(workload: WorkloadFile, *, steps: int | None, seed: int) -> dict[str, Any]:
    """Run every pipeline of ``workload`` to completion; per-pipeline and aggregate figures."""
    controller = Controller(workload.cluster, RooflineCostModel(load_device_profile(workload.cluster.device_type)))
    names: dict[str, str] = {}
    for i, spec in enumerate(workload.pipelines):
        spec = dict(spec)
        spec["seed"] = seed * 1000 + i
        if steps is not None:
            spec["trainer"] = {**spec.get("trainer", {}), "total_steps": steps}
        pid = f"p{i}"
        names[pid] = str(spec.get("name", pid))
        controller.submit(pid, spec, now_s=0.0)
    makespan_s = controller.run_until_idle()
    per: dict[str, dict[str, Any]] = {pid: {"steps": [], "tokens": 0.0, "start_s": None, "end_s": 0.0} for pid in names}
    for e in controller.events.since(0, 10**9):
        p = per[e.pipeline_id]
        if e.kind is EventKind.METRICS:
            p["steps"].append(e.data["metrics"]["timing_s/step"])
            p["tokens"] += e.data["metrics"]["perf/total_num_tokens"]
        elif e.data.get("status") == "running":
            p["start_s"] = e.sim_time_s
        elif e.data.get("status") == "succeeded":
            p["end_s"] = e.sim_time_s
    pipelines = {
        names[pid]: {
            "step_latency_s": sum(p["steps"]) / len(p["steps"]),
            "tokens_per_s": p["tokens"] / (p["end_s"] - p["start_s"]),
            "completion_s": p["end_s"],
        }
        for pid, p in per.items()
    }
    total_tokens = sum(p["tokens"] for p in per.values())
    return {
        "cluster": {"num_devices": workload.cluster.num_devices, "device_type": workload.cluster.device_type},
        "policies": {
            "dedicated": {
                "throughput_tokens_per_s": total_tokens / makespan_s,
                "makespan_s": makespan_s,
                "pipelines": pipelines,
            }
        },
    }


def _print_table(result: dict[str, Any]) -> None:
    for policy, r in result["policies"].items():
        print(f"policy {policy}: {r['throughput_tokens_per_s']:.0f} trained tokens/s, makespan {r['makespan_s']:.0f} s")
        print(f"  {'pipeline':28s} {'step s':>9s} {'tokens/s':>10s} {'done at s':>10s}")
        for name, p in r["pipelines"].items():
            print(f"  {name:28s} {p['step_latency_s']:9.1f} {p['tokens_per_s']:10.0f} {p['completion_s']:10.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jigsaw", description="JigsawRL engine tools")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check a pipeline spec (YAML or JSON) and list every problem")
    v.add_argument("spec", type=Path)
    s = sub.add_parser("simulate", help="simulate a workload file on a virtual clock")
    s.add_argument("--workload", type=Path, required=True, help="YAML/JSON with cluster and pipelines")
    s.add_argument("--policies", default="dedicated", help=f"comma separated; available: {', '.join(POLICIES)}")
    s.add_argument("--steps", type=int, default=None, help="override every pipeline's trainer.total_steps")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    try:
        if args.command == "validate":
            raw = yaml.safe_load(args.spec.read_text())
            parse_pipeline_spec(raw)
            print(f"{args.spec}: ok")
            return 0
        unknown = [p for p in args.policies.split(",") if p not in POLICIES]
        if unknown:
            print(f"--policies: unknown {', '.join(unknown)}; available now: {', '.join(POLICIES)}", file=sys.stderr)
            return 2
        if args.steps is not None and args.steps < 1:
            print(f"--steps: must be >= 1, got {args.steps}", file=sys.stderr)
            return 2
        result = simulate(load_workload_file(args.workload), steps=args.steps, seed=args.seed)
    except SpecError as exc:
        for error in exc.errors:
            print(f"{error.field}: {error.message}", file=sys.stderr)
        return 1
    except (OSError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _print_table(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
