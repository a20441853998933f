"""The engine's devices, reserved from Ray as placement groups, and its actors placed on them.

One placement group per node of the engine's cluster, one bundle per device, the bundles of a
group packed onto one Ray node (``STRICT_PACK``). Ray then keeps those devices for the engine:
other work on the same Ray cluster cannot take them, and a cluster too small for the engine's
plan is an error at once, not silently oversubscribed devices. An actor placed on device ``d``
runs on the Ray node that holds ``d``.

On a CPU cluster a device is a core: a bundle is ``{CPU: 1}``. On a GPU cluster a device is a
GPU: a bundle is ``{GPU: 1}`` alone (the processes that drive a GPU use the host's cores as
the OS schedules them; the GPU is what the scheduler shares), and Ray gives each actor placed
on it that one GPU: ``ray.get_gpu_ids()`` and ``CUDA_VISIBLE_DEVICES`` in its process name it.
Processes that only orchestrate or do host work (a job's own process, its environment) are
placed on a device's node but book no GPU and see none (:meth:`DevicePlacement.host_options`).

Each actor books a small fraction of its device's bundle (``ACTOR_SHARE``; verl co-locates its
workers on a GPU the same way), so the processes of several pipelines can live on one device.
Ray's fractions are bookkeeping: it enforces neither a CPU nor a GPU share. The split between
co-located sub-stages is the scheduler's, made real on a CPU by pinning each node's thread to
the cores it was placed on (:mod:`jigsaw_engine.real.pipeline_actor`), and on GPUs by running
each node in processes that hold exactly its GPUs.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from jigsaw_engine.errors import FieldError, SpecError
from jigsaw_engine.models.compute import resolve_compute_device
from jigsaw_engine.runtime.ray.nodes import live_node_resources, missing_nodes
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
"""How long the reservation may wait for Ray before the cluster is judged too small (a Ray
cluster that cannot hold the plan at all is refused before any wait)."""

NORMAL_PRIORITY = {"RAY_worker_niceness": "0"}
"""Every process placed on the engine's devices runs at the host's normal priority, on any Ray
(:data:`EMBEDDED_RAY_SYSTEM_CONFIG` does so only for a Ray the engine starts). Ray starts its
workers at nice 15; a worker process reads Ray's settings from its environment as it starts,
so this runtime env keeps its priority at 0 from its first instruction. It is given only where
Ray's workers would start lower (:func:`_priority_env`): a process asked with a runtime env
cannot be one of Ray's already started idle workers, and starting a new one costs a second or
more per actor on a busy host. At nice 15 on a host
whose cores other processes keep busy, a new worker gets a few percent of a core: importing
torch and building a job's policy then takes minutes, and a job resumed after a node's loss
(whose processes all start anew, on fewer nodes) waits that long in Ray's actor creation."""

HIDE_GPUS = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "1"}
"""A process that books no GPU sees none: Ray then sets its ``CUDA_VISIBLE_DEVICES`` to empty
(by default it leaves it every GPU of its node). Set as Ray's own switch, not as an empty
``CUDA_VISIBLE_DEVICES``: actors inherit their creator's environment, and a GPU actor started
by such a process would inherit the empty list and see no GPU either."""


def unplaced() -> dict[str, Any]:
    """Actor options without a reservation: the actor books nothing and may land anywhere."""
    return {"num_cpus": 0}


class DevicePlacement:
    """The reservation: picklable, so the actors it places can place their own workers."""

    def __init__(self, cluster: ClusterSpec, *, timeout_s: float | None = None) -> None:
        timeout_s = READY_TIMEOUT_S if timeout_s is None else timeout_s
        self.cluster = cluster
        self._gpu = cluster.device_type != "cpu"
        bundle = {"GPU": 1.0} if self._gpu else {"CPU": 1.0}
        missing = _missing_on_every_node(bundle, cluster.devices_per_node)
        if missing:
            raise SpecError([FieldError("cluster.devices_per_node", self._cannot_hold(bundle, missing))])
        short = missing_nodes(cluster, bundle)  # a node that never joined: named at once, not after a wait
        if short:
            raise SpecError([FieldError("cluster.num_nodes", short)])
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
        self._priority = _priority_env(self.groups)

    def _plan(self, bundle: dict[str, float]) -> str:
        per_node = ", ".join(f"{self.cluster.devices_per_node:g} {name}" for name in bundle)
        return (
            f"the engine plans {self.cluster.num_nodes} node(s) of {self.cluster.devices_per_node} "
            f"{self.cluster.device_type} devices, each node needing {per_node} on one Ray node"
        )

    def _fix(self) -> str:
        flag = "--num-gpus" if self._gpu else "--num-cpus"
        return (
            f"start Ray with at least that many (`ray start {flag}=N`), free them, or plan fewer devices "
            f"per node (devices_per_node, or ENGINE_DEVICES_PER_NODE for the service)"
        )

    def _cannot_hold(self, bundle: dict[str, float], missing: str) -> str:
        return (
            f"{self._plan(bundle)}, and no Ray node has that many: {missing} "
            f"(Ray has {_resources(ray.cluster_resources())}); {self._fix()}"
        )

    def _too_small(self, bundle: dict[str, float], timeout_s: float) -> str:
        return (
            f"{self._plan(bundle)}, and Ray could not reserve them in {timeout_s:g} s (Ray has "
            f"{_resources(ray.cluster_resources())}, {_resources(ray.available_resources())} free); "
            f"{self._fix()}"
        )

    def actor_options(self, device: int) -> dict[str, Any]:
        """``.options(...)`` for an actor that lives on ``device`` (any int: taken modulo the cluster)."""
        options: dict[str, Any] = {"num_cpus": ACTOR_SHARE, "scheduling_strategy": self._bundle(device)}
        if self._gpu:  # its bundle's GPU, and no share of the host's cores to wait for
            options = {"num_cpus": 0, "num_gpus": ACTOR_SHARE, "scheduling_strategy": self._bundle(device)}
        if self._priority:
            options["runtime_env"] = {"env_vars": dict(self._priority)}
        return options

    def host_options(self, device: int) -> dict[str, Any]:
        """``.options(...)`` for a process on ``device``'s node that does no device work (a job's
        own process, its environment): on a GPU cluster it books no GPU and sees none; on a CPU
        cluster it is placed as any actor (a core is where its threads are pinned)."""
        if not self._gpu:
            return self.actor_options(device)
        return {
            "num_cpus": 0,
            "num_gpus": 0,
            "scheduling_strategy": self._bundle(device),
            "runtime_env": {"env_vars": {**HIDE_GPUS, **self._priority}},
        }

    def _bundle(self, device: int) -> PlacementGroupSchedulingStrategy:
        node, index = divmod(device % self.cluster.num_devices, self.cluster.devices_per_node)
        return PlacementGroupSchedulingStrategy(placement_group=self.groups[node], placement_group_bundle_index=index)

    def gpu_ids(self) -> dict[int, list[str]]:
        """Per engine device, the GPU id(s) Ray gives an actor placed there (a short task on
        each bundle); empty lists on a CPU cluster."""
        if not self._gpu:
            return {d: [] for d in range(self.cluster.num_devices)}
        probes = {d: _gpu_ids_here.options(**self.actor_options(d)).remote() for d in range(self.cluster.num_devices)}
        got: Any = ray.get  # a remote function's refs are typed loosely
        return {d: list(got(ref)) for d, ref in probes.items()}

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


def placed_on_host(placement: DevicePlacement | None, device: int) -> dict[str, Any]:
    return placement.host_options(device) if placement is not None else unplaced()


def devices_seen() -> dict[str, Any]:
    """What Ray gave the calling actor's process: its GPU ids (``ray.get_gpu_ids()``), its
    ``CUDA_VISIBLE_DEVICES`` (None: not set), its pid, and what it computes on
    (:func:`~jigsaw_engine.models.compute.resolve_compute_device`)."""
    return {
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "pid": os.getpid(),
        "compute": resolve_compute_device().kind,
    }


def _priority_env(groups: list[PlacementGroup]) -> dict[str, str]:
    """:data:`NORMAL_PRIORITY` where a reserved node's Ray starts its workers below the normal
    priority, else nothing. One idle-worker task per node asks; Ray's worker settings are the
    cluster's own (nodes that join take the head's), so a node that later replaces a lost one
    starts its workers the same way."""
    at = [PlacementGroupSchedulingStrategy(placement_group=g, placement_group_bundle_index=0) for g in groups]
    got: Any = ray.get  # a remote function's refs are typed loosely
    niceness = got([_niceness_here.options(num_cpus=0, scheduling_strategy=s).remote() for s in at])
    return dict(NORMAL_PRIORITY) if any(n > 0 for n in niceness) else {}


@ray.remote
def _niceness_here() -> int:
    return os.nice(0)


@ray.remote
def _gpu_ids_here() -> list[str]:
    return [str(g) for g in ray.get_gpu_ids()]


def _missing_on_every_node(bundle: dict[str, float], count: int) -> str:
    """What the fullest live Ray node lacks of ``count`` bundles (empty: some node can hold
    them, free or not): a plan no node could ever hold is refused without waiting."""
    totals = live_node_resources()
    if not totals:
        return ""
    gaps = []
    for name, amount in bundle.items():
        most = max(float(t.get(name, 0.0)) for t in totals)
        if most < amount * count:
            gaps.append(f"{amount * count:g} {name} wanted on one node, the largest node has {most:g} {name}")
    return "; ".join(gaps)


def _resources(resources: dict[str, float]) -> str:
    shown = {k: v for k, v in resources.items() if k in ("CPU", "GPU")}
    return ", ".join(f"{v:g} {k}" for k, v in sorted(shown.items())) or "no CPU or GPU"
