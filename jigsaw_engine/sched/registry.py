"""Schedulers the service can run, by name (the benchmark's policies live in ``bench/``)."""

from __future__ import annotations

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.graph.builder import GraphConfig
from jigsaw_engine.sched.dedicated import DedicatedScheduler
from jigsaw_engine.sched.jigsaw import JIGSAW_GRAPH, JigsawOptions, JigsawScheduler
from jigsaw_engine.sched.protocol import Scheduler
from jigsaw_engine.spec.cluster import ClusterSpec

SERVICE_SCHEDULERS = ("jigsaw", "greedy", "dedicated")


def graph_config_for(name: str) -> GraphConfig:
    """The sub-stage graph options each scheduler plans with."""
    return JIGSAW_GRAPH if name in ("jigsaw", "greedy") else GraphConfig()


def make_scheduler(name: str, cluster: ClusterSpec, cost: RooflineCostModel) -> Scheduler:
    if name == "jigsaw":
        return JigsawScheduler(cluster, cost)
    if name == "greedy":
        return JigsawScheduler(cluster, cost, JigsawOptions(lookahead=False), name="greedy")
    if name == "dedicated":
        return DedicatedScheduler()
    raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(SERVICE_SCHEDULERS)}")
