"""Schedulers the service can run, by name (the benchmark's policies live in ``bench/``)."""

from __future__ import annotations

from dataclasses import replace

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


def real_graph_config_for(name: str) -> GraphConfig:
    """The graph options for pipelines trained for real on this host. A real job keeps whole
    batches (each log-prob forward over the whole batch) and a rollout engine serves one
    step's episodes at a time, so three of the simulator's mechanisms are off: tail migration,
    per-worker early forwards, and an async worker's next rollout beside its tail."""
    return replace(graph_config_for(name), migrate_tails=False, early_logprobs=False, overlap_rollouts=False)


def make_scheduler(
    name: str, cluster: ClusterSpec, cost: RooflineCostModel, *, real_pipelines: bool = False
) -> Scheduler:
    """``real_pipelines``: pipelines trained for real on this host. Their update runs in one
    process (no data-parallel trainer), so Jigsaw never widens a training chain beyond the
    step's width (the extra cores would sit idle, held); their rollout width follows the
    scheduler like a simulated pipeline's (a job builds an engine per core)."""
    fixed = {"widen": False} if real_pipelines else {}
    if name == "jigsaw":
        return JigsawScheduler(cluster, cost, JigsawOptions(**fixed))
    if name == "greedy":
        return JigsawScheduler(cluster, cost, JigsawOptions(lookahead=False, **fixed), name="greedy")
    if name == "dedicated":
        return DedicatedScheduler()
    raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(SERVICE_SCHEDULERS)}")
