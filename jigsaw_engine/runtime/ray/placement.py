"""The engine's devices, reserved from Ray as placement groups, and its actors placed on them.

One placement group per node of the engine's cluster, one bundle per device (a core here, a
GPU on a GPU host), the bundles of a group packed onto one Ray node (``STRICT_PACK``). Ray then
keeps those devices for the engine: other work on the same Ray cluster cannot take them, and a
cluster too small for the engine's plan is an error at once, not silently oversubscribed cores.
An actor placed on device ``d`` runs on the Ray node that holds ``d``.

Each actor books a small fraction of its device's bundle (``ACTOR_SHARE``; verl co-locates its
workers on a GPU the same way), so the processes of several pipelines can live on one device.
Ray's fractions are bookkeeping: it enforces neither a CPU nor a GPU share. The split between
co-located sub-stages is the scheduler's, made real by pinning each node's thread to the
cores it was placed on (:mod:`jigsaw_engine.real.pipeline_actor`).
"""

from __future__ import annotations

import uuid
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.spec.cluster import ClusterSpec

ACTOR_SHARE = 1 / 64
"""What one actor books of its device: up to 64 processes (a pipeline's trainer, its rollout
workers, its environment; several pipelines') per device before Ray would make one wait."""

EMBEDDED_RAY_SYSTEM_CONFIG = {"worker_niceness": 0}
"""Ray settings for a cluster the engine starts itself (``jigsaw run``, the tests). Ray runs its
worker processes at nice 15, to keep its own daemons responsive; but a worker is where a device's
work runs, and at nice 15 any other process on the host that wakes (a broker's heartbeat, the
driver) takes the core at once. A node on two cores runs two torch threads that wait for each
other after every operator, so one thread preempted holds both back (what that costs:
``docs/real-runs.md``)."""

READY_TIMEOUT_S = 30.0
"""How long the reservation may wait for Ray before the cluster is judged too small."""


def unplaced() -> dict[str, Any]:
    """Actor options without a reservation: the actor books nothing and may land anywhere."""
    return {"num_cpus": 0}


class DevicePlacement:
    """The reservation: picklable, so the actors it places can place their own workers."""

    def __init__(self, cluster: ClusterSpec, *, timeout_s: float | None = None) -> None:
        timeout_s = READY_TIMEOUT_S if timeout_s is None else timeout_s
        self.cluster = cluster
        self._gpu = cluster.device_type != "cpu"
        bundle = {"CPU": 1.0, "GPU": 1.0} if self._gpu else {"CPU": 1.0}
        tag = uuid.uuid4().hex[:8]
        bundles = [dict(bundle) for _ in range(cluster.devices_per_node)]
        self.groups: list[PlacementGroup] = [
            placement_group(bundles, strategy="STRICT_PACK", name=f"jigsaw-{tag}-node{n}")
            for n in range(cluster.num_nodes)
        ]
        ready, _ = ray.wait([g.ready() for g in self.groups], num_returns=len(self.groups), timeout=timeout_s)
        if len(ready) < len(self.groups):
            self.remove()
            raise SpecError([FieldError("cluster.devices_per_node", self._too_small(bundle, timeout_s))])

    def _too_small(self, bundle: dict[str, float], timeout_s: float) -> str:
        per_node = ", ".join(f"{self.cluster.devices_per_node:g} {name}" for name in bundle)
        return (
            f"the engine plans {self.cluster.num_nodes} node(s) of {self.cluster.devices_per_node} "
            f"{self.cluster.device_type} devices, each node needing {per_node} on one Ray node, and Ray "
            f"could not reserve them in {timeout_s:g} s (Ray has {_resources(ray.cluster_resources())}, "
            f"{_resources(ray.available_resources())} free); start Ray with at least that many "
            f"(`ray start --num-cpus=N`), free them, or plan fewer devices per node "
            f"(devices_per_node, or ENGINE_DEVICES_PER_NODE for the service)"
        )

    def actor_options(self, device: int) -> dict[str, Any]:
        """``.options(...)`` for an actor that lives on ``device`` (any int: taken modulo the cluster)."""
        node, index = divmod(device % self.cluster.num_devices, self.cluster.devices_per_node)
        options: dict[str, Any] = {
            "num_cpus": ACTOR_SHARE,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=self.groups[node], placement_group_bundle_index=index
            ),
        }
        if self._gpu:
            options["num_gpus"] = ACTOR_SHARE
        return options

    def remove(self) -> None:
        """Give the devices back to Ray (actors still in the groups are killed by Ray)."""
        for group in self.groups:
            remove_placement_group(group)


def trains_across_devices(cluster: ClusterSpec | None) -> bool:
    """Whether a job asking several devices trains as an FSDP2 group by default: on GPUs yes;
    on a CPU's cores only when asked (a tiny model trains faster on threads of one process)."""
    return cluster is not None and cluster.device_type != "cpu"


def placed(placement: DevicePlacement | None, device: int) -> dict[str, Any]:
    return placement.actor_options(device) if placement is not None else unplaced()


def _resources(resources: dict[str, float]) -> str:
    shown = {k: v for k, v in resources.items() if k in ("CPU", "GPU")}
    return ", ".join(f"{v:g} {k}" for k, v in sorted(shown.items())) or "no CPU or GPU"
