"""MuxServe's placement, given its best configuration by search.

Candidate groupings: every pipeline alone (then MuxServe is verl's dedicated layout), and
complementary pairs (the largest with the smallest) whose two models' weights fit side by side
with room for KV cache. A group gets the devices its members asked for, both members colocated
on all of them. Groups are isolated, so each is simulated on its own for a few steps; the
grouping with the most tokens over its slowest group's time wins.
"""

from __future__ import annotations

from dataclasses import replace

from jigsaw_engine.bench.rollmux_plan import SEARCH_STEPS, candidate_groupings, simulate_isolated_group
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.sched.muxserve import MuxGroup, MuxServeScheduler
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec

WEIGHTS_MAX_MEMORY_FRACTION = 0.6
"""Both members' weight shards must leave at least 40% of a device for KV cache."""


def _member_specs(group: MuxGroup, specs: dict[str, PipelineSpec]) -> dict[str, PipelineSpec]:
    size = len(group.devices)
    return {
        pid: replace(specs[pid], resources=replace(specs[pid].resources, num_gpus=size, rollout_gpus=None))
        for pid in group.members
    }


def _fits(members: tuple[str, ...], specs: dict[str, PipelineSpec], memory_bytes: float) -> bool:
    weights = sum(specs[p].model.weight_bytes_bf16 / specs[p].resources.tp for p in members)
    size = sum(specs[p].resources.num_gpus for p in members)
    return (
        len(members) <= 2
        and weights <= WEIGHTS_MAX_MEMORY_FRACTION * memory_bytes
        and all(size % specs[p].resources.tp == 0 for p in members)
    )


def _simulate_group(cluster: ClusterSpec, group: MuxGroup, specs: dict[str, PipelineSpec]) -> tuple[int, float]:
    local = MuxGroup(group.members, tuple(range(len(group.devices))))
    return simulate_isolated_group(
        cluster,
        len(group.devices),
        lambda cost: MuxServeScheduler([local], cost),
        _member_specs(local, specs),
        SEARCH_STEPS,
    )


def plan_muxserve(
    cluster: ClusterSpec, specs: dict[str, PipelineSpec]
) -> tuple[dict[str, PipelineSpec], MuxServeScheduler]:
    memory = load_device_profile(cluster.device_type).memory_bytes
    order = sorted(specs, key=lambda pid: -specs[pid].resources.num_gpus)
    best: tuple[float, list[MuxGroup]] | None = None
    simulated: dict[tuple[str, ...], tuple[int, float]] = {}
    for grouping in candidate_groupings(order):
        # A group that does not fit (too large, or too little memory) falls back to its members alone.
        members_list = [m for g in grouping for m in ([g] if _fits(g, specs, memory) else [(p,) for p in g])]
        groups: list[MuxGroup] = []
        tokens, makespan, start = 0, 0.0, 0
        for members in members_list:
            size = sum(specs[pid].resources.num_gpus for pid in members)
            group = MuxGroup(members, tuple(range(start, start + size)))
            start += size
            if members not in simulated:
                simulated[members] = _simulate_group(cluster, group, specs)
            t, m = simulated[members]
            groups.append(group)
            tokens, makespan = tokens + t, max(makespan, m)
        if best is None or tokens / makespan > best[0]:
            best = (tokens / makespan, groups)
    assert best is not None  # the all-alone grouping always fits
    planned: dict[str, PipelineSpec] = {}
    for group in best[1]:
        planned.update(_member_specs(group, specs))
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    return {pid: planned[pid] for pid in specs}, MuxServeScheduler(best[1], cost)
