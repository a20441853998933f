"""How far any schedule could take a built-in mix past verl, under the simulator's cost model.

    .venv/bin/python scripts/mix_bounds.py [--seeds 0,1,2] [--steps 20]

Two things no schedule of a mix is expected to beat, the practical lower bound and the
mix's longest pipeline alone on the whole cluster (:mod:`jigsaw_engine.bench.ceiling`, where
``jigsaw bench`` takes its "share of ceiling" from too).

Throughput is the mix's tokens over its makespan, so ``verl``'s makespan over the larger of the
two is the most ``jigsaw / verl`` can reach. The script prints, per mix, both makespans, both
bounds, that ceiling and the share of it ``jigsaw`` reaches (medians over the seeds), then the
averages over M0-M4 (M0 on 8xH100), as ``jigsaw bench`` averages them.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from jigsaw_engine.bench.ceiling import longest_alone_s
from jigsaw_engine.bench.mixes import mix_document
from jigsaw_engine.bench.simulate import simulate_workload
from jigsaw_engine.bench.suite import SUITE_MIXES
from jigsaw_engine.spec.workload_file import parse_workload

AVERAGED = ("M0", "M1", "M2", "M3", "M4")
MIXES = [m for m in SUITE_MIXES if m[0] in (*AVERAGED, "M0-64xa100")]
"""The synchronous mixes of ``jigsaw bench`` (the bound on a lone pipeline assumes it is sync)."""


def mix_row(mix: str, variant: str | None, *, steps: int, seed: int) -> dict[str, Any]:
    doc = mix_document(mix, variant=variant)
    report = simulate_workload(parse_workload(doc), ["verl", "jigsaw"], steps=steps, seed=seed, timing=False)
    verl, jigsaw = (report["policies"][p]["makespan_s"] for p in ("verl", "jigsaw"))
    alone_s, longest = longest_alone_s(doc, steps=steps, seed=seed)
    practical_s = report["lower_bound"]["practical_s"]
    ceiling = verl / max(alone_s, practical_s)
    return {
        "verl_s": verl,
        "jigsaw_s": jigsaw,
        "practical_lb_s": practical_s,
        "longest_alone_s": alone_s,
        "longest": longest,
        "jigsaw/verl": verl / jigsaw,
        "ceiling": ceiling,
        "share": verl / jigsaw / ceiling,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0", help="comma separated (jigsaw bench uses 0,1,2)")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    header = f"{'mix':11s} {'verl s':>7s} {'jigsaw s':>8s} {'LB s':>6s} {'alone s':>7s}"
    print(f"{header} {'jigsaw/verl':>11s} {'ceiling':>7s} {'share':>6s}  longest pipeline")
    medians: dict[str, dict[str, float]] = {}
    for label, mix, variant in MIXES:
        rows = [mix_row(mix, variant, steps=args.steps, seed=s) for s in seeds]
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "longest"}
        medians[label] = m
        print(
            f"{label:11s} {m['verl_s']:7.0f} {m['jigsaw_s']:8.0f} {m['practical_lb_s']:6.0f}"
            f" {m['longest_alone_s']:7.0f} {m['jigsaw/verl']:11.3f} {m['ceiling']:7.3f} {m['share']:6.0%}"
            f"  {rows[0]['longest']}",
            flush=True,
        )
    ratio = statistics.mean(medians[m]["jigsaw/verl"] for m in AVERAGED)
    ceiling = statistics.mean(medians[m]["ceiling"] for m in AVERAGED)
    print(f"\nM0-M4 average: jigsaw/verl {ratio:.3f}, ceiling {ceiling:.3f}")


if __name__ == "__main__":
    main()
