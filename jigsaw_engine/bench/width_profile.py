"""Where a mix's gap to its lower bound goes: each pipeline's step at every data-parallel width
(:func:`profile_width`), and two estimates of how often a mix could step with its rollouts and
trainings on different widths: a fluid packing (:func:`packed_step_s`) and pipelines taking
turns with whole sub-stages (:func:`round_robin_step_s`). ``scripts/width_profile.py`` prints them.

Training scales with the width (data parallelism), decode mostly does not: a long-tailed rollout
lasts as long as its longest sequence, so more workers only cut their batches, and memory-bound
iterations cost about the same at a smaller batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from jigsaw_engine.bench.simulate import POLICIES, run_policy
from jigsaw_engine.sched.jigsaw.projection import turns_devices, turns_step_s
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec

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
