"""RollMux's inter-group placement, given its best configuration by search.

Candidate groupings: every job alone (plain disaggregation), complementary pairs (the largest
job with the smallest), and all jobs in one group. Each group gets the devices its members
asked for, split into rollout and training pools; the split is searched over quarters of the
group. Groups are isolated, so each is simulated on its own for a few steps and a grouping
scores its total tokens over its slowest group's time. The best grouping wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.errors import PolicyError
from jigsaw_engine.sched.protocol import Scheduler
from jigsaw_engine.sched.rollmux import CoExecutionGroup, RollMuxScheduler
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec

SEARCH_STEPS = 3
SPLITS = (0.25, 0.5, 0.75)


def _member_specs(group: CoExecutionGroup, specs: dict[str, PipelineSpec]) -> dict[str, PipelineSpec]:
    """Every member rolls out on the whole rollout pool and trains on the whole training pool."""
    size = len(group.devices)
    return {
        pid: replace(
            specs[pid], resources=replace(specs[pid].resources, num_gpus=size, rollout_gpus=group.rollout_gpus)
        )
        for pid in group.members
    }


def simulate_isolated_group(
    cluster: ClusterSpec,
    size: int,
    make_scheduler: Callable[[RooflineCostModel], Scheduler],
    member_specs: dict[str, PipelineSpec],
    steps: int,
) -> tuple[int, float]:
    """(tokens, makespan) of a group of pipelines alone on ``size`` devices for ``steps`` steps:
    how a baseline's search scores one candidate layout of one group."""
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    controller = ClusterController(ClusterSpec(1, size, cluster.device_type), cost, scheduler=make_scheduler(cost))
    for pid, spec in member_specs.items():
        controller.submit(pid, replace(spec, total_steps=min(steps, spec.total_steps)))
    makespan = controller.run_until_idle()
    return sum(r.tokens for r in controller.finished_runs().values()), makespan


def _simulate_group(
    cluster: ClusterSpec, group: CoExecutionGroup, specs: dict[str, PipelineSpec], steps: int
) -> tuple[int, float]:
    local = CoExecutionGroup(group.members, tuple(range(len(group.devices))), group.rollout_gpus)
    return simulate_isolated_group(
        cluster, len(group.devices), lambda cost: RollMuxScheduler([local], cost), _member_specs(local, specs), steps
    )


def _splits(members: tuple[str, ...], size: int, specs: dict[str, PipelineSpec]) -> list[int]:
    unit = math.lcm(*(specs[pid].resources.tp for pid in members))
    options = {max(unit, round(size * f / unit) * unit) for f in SPLITS}
    return sorted(r for r in options if r < size)


def _best_group(
    cluster: ClusterSpec, members: tuple[str, ...], devices: tuple[int, ...], specs: dict[str, PipelineSpec]
) -> tuple[CoExecutionGroup, int, float] | None:
    best: tuple[CoExecutionGroup, int, float] | None = None
    for rollout_gpus in _splits(members, len(devices), specs):
        group = CoExecutionGroup(members, devices, rollout_gpus)
        tokens, makespan = _simulate_group(cluster, group, specs, SEARCH_STEPS)
        if best is None or tokens / makespan > best[1] / best[2]:
            best = (group, tokens, makespan)
    return best


def candidate_groupings(order: list[str]) -> list[list[tuple[str, ...]]]:
    """Every job alone, complementary pairs (the largest with the smallest), all together."""
    singles: list[tuple[str, ...]] = [(pid,) for pid in order]
    pairs: list[tuple[str, ...]] = [(order[i], order[-1 - i]) for i in range(len(order) // 2)]
    if len(order) % 2:
        pairs.append((order[len(order) // 2],))
    return [singles, pairs, [tuple(order)]]


def plan_rollmux(
    cluster: ClusterSpec, specs: dict[str, PipelineSpec]
) -> tuple[dict[str, PipelineSpec], RollMuxScheduler]:
    order = sorted(specs, key=lambda pid: -specs[pid].resources.num_gpus)
    best: tuple[float, list[CoExecutionGroup]] | None = None
    for grouping in candidate_groupings(order):
        groups: list[CoExecutionGroup] = []
        tokens, makespan, start, feasible = 0, 0.0, 0, True
        for members in grouping:
            size = sum(specs[pid].resources.num_gpus for pid in members)
            found = _best_group(cluster, members, tuple(range(start, start + size)), specs)
            start += size
            if found is None:
                feasible = False  # a one-device job cannot be split into two pools
                break
            groups.append(found[0])
            tokens += found[1]
            makespan = max(makespan, found[2])
        if feasible and (best is None or tokens / makespan > best[0]):
            best = (tokens / makespan, groups)
    if best is None:
        raise PolicyError("rollmux: no layout fits; every grouping has a group too small to split into two pools")
    groups = best[1]
    planned: dict[str, PipelineSpec] = {}
    for group in groups:
        planned.update(_member_specs(group, specs))
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    return {pid: planned[pid] for pid in specs}, RollMuxScheduler(groups, cost)
