"""Where a mix's gap to its lower bound goes: each pipeline's step at every data-parallel width.

    .venv/bin/python scripts/width_profile.py --mix M1 [--variant 8xh100] [--steps 5] [--seed 0]

Each distinct pipeline of the mix is simulated alone, synchronous and colocated as verl runs it,
at every width from one rollout worker to the whole cluster. Per width it prints the step time,
the wall time of its rollout and of its training part (log-prob forwards, update, weight sync),
and the device-seconds each costs per step.

Training scales with the width (data parallelism), decode mostly does not: a long-tailed rollout
lasts as long as its longest sequence, so more workers only cut their batches, and memory-bound
iterations cost about the same at a smaller batch. The lower bound charges decode at the largest
batch that fits, so on a mix of such pipelines the gap to it is decode run wide, not idle time.

The last lines are a packing estimate: every kind of pipeline rolls out on one width and trains
on another, chosen so that the mix steps as often as it can with its work spread over the
cluster with no gap and no pipeline's chain (rollout, then training) longer than the period
(:func:`packed_step_s`). It is what a schedule of narrow rollouts beside other pipelines'
training could reach if it staggered their phases perfectly. The report's lower bound, which
charges decode at the largest batch that fits, is lower still. Pipelines are taken as stepping
together, so on a mix whose pipelines' step times differ the estimate is loose.

The packing is fluid: it lets device-seconds fill any gap, while a training sub-stage needs its
devices all at once. On a mix of one kind of pipeline (M1) the script also prints the best
schedule that keeps sub-stages whole (:func:`round_robin_step_s`): the pipelines take turns to
train, a few at a time on a wide group, while the others roll out on narrow ones.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.bench.width_profile import WidthRow, packed_step_s, profile_width, round_robin_step_s, widths
from jigsaw_engine.spec.pipeline import parse_pipeline_spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mix", default="M1")
    parser.add_argument("--variant", default=None)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    workload = build_mix(args.mix, variant=args.variant)
    cluster = workload.cluster
    specs = [parse_pipeline_spec(raw) for raw in workload.pipelines]
    counts: dict[tuple[str, str, str], int] = {}
    for spec in specs:
        kind = (spec.model.name, spec.workload.name, spec.algorithm.value)
        counts[kind] = counts.get(kind, 0) + 1
    print(f"{args.mix} on {cluster.num_devices} x {cluster.device_type}, {args.steps} steps, seed {args.seed}")
    kinds: list[tuple[list[WidthRow], int]] = []
    seen: set[tuple[str, str, str]] = set()
    for spec in specs:
        kind = (spec.model.name, spec.workload.name, spec.algorithm.value)
        if kind in seen:
            continue
        seen.add(kind)
        spec = replace(spec, total_steps=args.steps, seed=args.seed * 1000 + spec.seed)
        print(f"\n{spec.name} (x{counts[kind]} in the mix; asks for {spec.resources.num_gpus})")
        header = ("width", "step s", "rollout s", "training s", "rollout dev-s", "training dev-s")
        print(" ".join(f"{h:>{w}s}" for h, w in zip(header, (5, 8, 10, 11, 14, 15), strict=True)))
        rows = [profile_width(cluster, spec, w) for w in widths(cluster, spec.resources.tp)]
        for r in rows:
            print(
                f"{r.width:5d} {r.step_s:8.1f} {r.rollout_s:10.1f} {r.training_s:11.1f} "
                f"{r.rollout_device_s:14.1f} {r.training_device_s:15.1f}"
            )
        kinds.append((rows, counts[kind]))
    step_s, layouts = packed_step_s(kinds, cluster.num_devices)
    print("\npacked with no gap, each kind's rollout and training widths chosen for the shortest step:")
    for (_, count), layout in zip(kinds, layouts, strict=True):
        print(
            f"  x{count}: rollout on {layout.rollout.width}, training on {layout.training.width}: "
            f"{layout.chain_s:.1f} s chain, {layout.device_s:.1f} device-s a step"
        )
    steps = specs[0].total_steps
    print(f"  a step every {step_s:.1f} s: {step_s * steps:,.0f} s for the mix's {steps} steps")
    if len(kinds) == 1:  # one kind: the best schedule of whole sub-stages, at every width
        spec = replace(specs[0], total_steps=args.steps, seed=args.seed * 1000 + specs[0].seed)
        tp = spec.resources.tp
        every = {r.width: r for r in kinds[0][0]}
        for w in range(tp, cluster.num_devices + 1, tp):
            if w not in every:
                every[w] = profile_width(cluster, spec, w)
        ring = round_robin_step_s(every, kinds[0][1], cluster.num_devices)
        print(
            f"taking turns with whole sub-stages: {ring.at_once} at a time train on {ring.training.width}, "
            f"the others roll out on {ring.rollout.width}: a step every {ring.step_s:.1f} s: "
            f"{ring.step_s * steps:,.0f} s for {steps} steps"
        )


if __name__ == "__main__":
    main()
