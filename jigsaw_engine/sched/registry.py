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


def make_scheduler(name: str, cluster: ClusterSpec, cost: RooflineCostModel, *, fixed_width: bool = False) -> Scheduler:
    """``fixed_width``: the pipelines' workers are built once, at their asked width (real
    pipelines: one process, one rollout engine per data-parallel worker), so a step cannot run
    wider or narrower. Jigsaw then neither resizes homes nor widens training chains (a widened
    chain would hold a core its single process cannot use); lending idle cores to rollout
    workers and everything else stays."""
    fixed = {"resize": False, "widen": False} if fixed_width else {}
    if name == "jigsaw":
        return JigsawScheduler(cluster, cost, JigsawOptions(**fixed))
    if name == "greedy":
        return JigsawScheduler(cluster, cost, JigsawOptions(lookahead=False, **fixed), name="greedy")
    if name == "dedicated":
        return DedicatedScheduler()
    raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(SERVICE_SCHEDULERS)}")
