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
from collections.abc import Mapping
from dataclasses import dataclass, replace

from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.bench.simulate import POLICIES, run_policy
from jigsaw_engine.sched.projection import turns_devices, turns_step_s
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec, parse_pipeline_spec

ROLLOUT_KINDS = ("prefill", "decode", "tool")


@dataclass(frozen=True, slots=True)
class WidthRow:
    width: int
    step_s: float
    rollout_s: float
    """Wall time from a step's first rollout sub-stage to its last, per step."""
    training_s: float
    rollout_device_s: float
    """Devices the rollout holds times its wall time: the whole width waits for the last worker."""
    training_device_s: float


def profile_width(cluster: ClusterSpec, spec: PipelineSpec, width: int) -> WidthRow:
    """``spec`` alone on ``width`` devices, as ``verl-dedicated`` runs it (synchronous, colocated)."""
    spec = replace(spec, resources=ResourceSpec(num_gpus=width, tp=spec.resources.tp))
    run = run_policy(POLICIES["verl-dedicated"], cluster, {"p": spec})
    makespan = run.makespan_s
    spans: dict[tuple[int, bool], list[float]] = {}
    for span in run.controller.timeline:
        if span.kind == "reward":
            continue
        window = spans.setdefault((span.step, span.kind in ROLLOUT_KINDS), [span.start_s, span.end_s])
        window[0], window[1] = min(window[0], span.start_s), max(window[1], span.end_s)
    steps = spec.total_steps
    rollout_s = sum(end - start for (_, rollout), (start, end) in spans.items() if rollout) / steps
    training_s = sum(end - start for (_, rollout), (start, end) in spans.items() if not rollout) / steps
    return WidthRow(width, makespan / steps, rollout_s, training_s, rollout_s * width, training_s * width)


@dataclass(frozen=True, slots=True)
class Layout:
    """A step with its rollout on one width and its training on another."""

    rollout: WidthRow
    training: WidthRow

    @property
    def chain_s(self) -> float:
        return self.rollout.rollout_s + self.training.training_s

    @property
    def device_s(self) -> float:
        return self.rollout.rollout_device_s + self.training.training_device_s


def packed_step_s(kinds: list[tuple[list[WidthRow], int]], num_devices: int) -> tuple[float, list[Layout]]:
    """The shortest step period ``P`` a perfect packing reaches, and each kind's layout at it.

    Every pipeline's step is a chain (its rollout, then its training), so ``P`` is at least the
    longest chain; the mix's device-seconds per step spread over the cluster must fit in it too.
    For each candidate ``P`` (every layout's chain), each kind takes the layout of fewest
    device-seconds whose chain fits; the best ``P`` is kept. ``kinds``: (a kind's rows, how many
    pipelines of it the mix holds)."""
    options = [[Layout(r, t) for r in rows for t in rows] for rows, _ in kinds]
    best: tuple[float, list[Layout]] = (float("inf"), [])
    for period in sorted({o.chain_s for layouts in options for o in layouts}):
        chosen = []
        for layouts in options:
            fitting = [o for o in layouts if o.chain_s <= period]
            if not fitting:
                break
            chosen.append(min(fitting, key=lambda o: o.device_s))
        else:
            work = sum(o.device_s * count for o, (_, count) in zip(chosen, kinds, strict=True))
            step_s = max(period, work / num_devices)
            if step_s < best[0]:
                best = (step_s, chosen)
    return best


@dataclass(frozen=True, slots=True)
class RoundRobin:
    """Identical pipelines taking turns to train: ``at_once`` of them train, each on
    ``training.width`` devices, while every other one rolls out on ``rollout.width``."""

    rollout: WidthRow
    training: WidthRow
    at_once: int
    step_s: float


def round_robin_step_s(rows: Mapping[int, WidthRow], count: int, num_devices: int) -> RoundRobin:
    """The shortest step period of ``count`` identical pipelines whose sub-stages stay whole.

    While ``s`` pipelines train on ``w`` devices each, the other ``count - s`` roll out on ``r``
    each, so ``s * w + (count - s) * r`` devices must exist (and ``count * r`` for the moments
    when every pipeline rolls out: :func:`turns_devices`). A pipeline's step is its chain
    (rollout on ``r``, then training on ``w``), and the trainings take ``ceil(count / s)`` turns
    a step, so the period is the longer of the two (:func:`turns_step_s`, as the scheduler
    plans its turns). ``rows``: the pipeline alone at each width."""
    best: RoundRobin | None = None
    for rollout in rows.values():
        for training in rows.values():
            for at_once in range(1, count + 1):
                if turns_devices(count, at_once, rollout.width, training.width) > num_devices:
                    continue
                period = turns_step_s(rollout.rollout_s, training.training_s, count, at_once)
                if best is None or period < best.step_s:
                    best = RoundRobin(rollout, training, at_once, period)
    if best is None:
        raise ValueError(f"{count} pipelines do not fit on {num_devices} devices at any of the widths given")
    return best


def widths(cluster: ClusterSpec, tp: int) -> list[int]:
    out, w = [], tp
    while w <= cluster.num_devices:
        out.append(w)
        w *= 2
    return out


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
