"""Schedulers the service can run, by name (the benchmark's policies live in ``bench/``)."""

from __future__ import annotations

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.sched.dedicated import DedicatedScheduler
from jigsaw_engine.sched.jigsaw import JigsawOptions, JigsawScheduler
from jigsaw_engine.sched.protocol import Scheduler
from jigsaw_engine.spec.cluster import ClusterSpec

SERVICE_SCHEDULERS = ("jigsaw", "greedy", "dedicated")


def make_scheduler(name: str, cluster: ClusterSpec, cost: RooflineCostModel) -> Scheduler:
    if name == "jigsaw":
        return JigsawScheduler(cluster, cost)
    if name == "greedy":
        return JigsawScheduler(cluster, cost, JigsawOptions(lookahead=False), name="greedy")
    if name == "dedicated":
        return DedicatedScheduler()
    raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(SERVICE_SCHEDULERS)}")
