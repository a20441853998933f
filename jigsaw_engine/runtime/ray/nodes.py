"""Which of the engine's nodes Ray holds now, told from the engine's placement groups.

Each node of the engine's cluster is one placement group packed onto one Ray node
(:class:`~jigsaw_engine.runtime.ray.placement.DevicePlacement`). When that Ray node dies (its
raylet is killed, its machine goes), Ray's GCS marks it dead after missing its health checks
(``health_check_period_ms`` x ``health_check_failure_threshold``: about 15 s by default) and
marks the group ``RESCHEDULING``: the group keeps its claim and is placed again, whole, as soon
as a node with room joins. So the group's state is the engine node's: placed, its devices
serve; not placed, they are lost, and they come back when Ray places the group again.

Actors started while a node is gone must not be placed on its group: they would wait,
unstarted, until it is back. :func:`avoiding` gives the placement those actors use.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from typing import TYPE_CHECKING, Any

import ray
from ray.util.placement_group import placement_group_table

from jigsaw_engine.spec.cluster import ClusterSpec

if TYPE_CHECKING:
    from jigsaw_engine.runtime.ray.placement import DevicePlacement

logger = logging.getLogger(__name__)

NODE_POLL_S = 1.0
"""How often the groups' states are read from Ray's GCS (one small call per engine node)."""
NODE_DEATH_NOTICE_S = 30.0
"""How long Ray may take to declare a dead node dead: its GCS's health checks (every 3 s, dead
after 5 missed, by default) with room to spare. A process of a node that died is unreachable
within seconds; its node is known lost only after this."""


class NodeWatch:
    """The engine nodes whose group Ray does not hold placed now, read at most every ``poll_s``."""

    def __init__(self, placement: DevicePlacement, *, poll_s: float = NODE_POLL_S) -> None:
        self._placement = placement
        self._poll_s = poll_s
        self._next_s = 0.0
        self._lock = threading.Lock()
        self._lost: dict[int, str] = {}
        self._ray_node: dict[int, str] = {}
        """Per engine node, the Ray node its group was last seen placed on."""

    def lost_nodes(self) -> dict[int, str]:
        """Engine node -> why it is lost; empty while Ray holds every group placed."""
        with self._lock:
            now = time.monotonic()
            if now >= self._next_s:
                self._next_s = now + self._poll_s
                self._read()
            return dict(self._lost)

    def lost_devices(self) -> dict[int, str]:
        """The devices of :meth:`lost_nodes`, each with its node's reason."""
        per_node = self._placement.cluster.devices_per_node
        return {n * per_node + i: why for n, why in self.lost_nodes().items() for i in range(per_node)}

    def _read(self) -> None:
        for node, group in enumerate(self._placement.groups):
            try:
                table = placement_group_table(group)
            except Exception:  # the GCS is unreachable for a moment: keep what was known
                logger.warning("could not read the state of engine node %d's placement group", node, exc_info=True)
                continue
            state = str(table.get("state", ""))
            held_on = {str(v) for v in table.get("bundles_to_node_id", {}).values() if v}
            if state == "CREATED" and held_on:
                if node in self._lost:
                    logger.warning("engine node %d is back, on Ray node %s", node, next(iter(held_on))[:12])
                self._ray_node[node] = next(iter(held_on))
                self._lost.pop(node, None)
            elif node not in self._lost:
                was = self._ray_node.get(node)
                on = f"Ray node {was[:12]}" if was else "its Ray node"
                self._lost[node] = (
                    f"engine node {node} lost: {on} left the cluster (placement group {state.lower() or 'gone'}); "
                    "Ray places it again when a node with room joins"
                )
                logger.warning("%s", self._lost[node])


def avoiding(placement: DevicePlacement, lost_nodes: set[int] | dict[int, str]) -> DevicePlacement:
    """``placement`` for actors started now: a lost node's devices are placed on the nodes
    still there, in turn (a job's rollout worker ``w`` lives on device ``w``, whatever the
    scheduler places). A copy that only places: it must never be removed."""
    lost = set(lost_nodes)
    live = [n for n in range(len(placement.groups)) if n not in lost]
    if not lost or not live:
        return placement
    moved = copy.copy(placement)
    turn = iter(range(len(placement.groups)))
    moved.groups = [
        group if n not in lost else placement.groups[live[next(turn) % len(live)]]
        for n, group in enumerate(placement.groups)
    ]
    return moved


def live_node_resources() -> list[dict[str, float]]:
    """Each live Ray node's total resources (free or not)."""
    return [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]


def missing_nodes(cluster: ClusterSpec, bundle: dict[str, float]) -> str:
    """Why Ray's live nodes cannot hold one group per engine node although some node can hold
    one (empty: they can, free or not, or no node can: a node too small is another error). A
    node that never joined is named at once, not after a wait."""
    per_group = {name: amount * cluster.devices_per_node for name, amount in bundle.items()}
    alive = live_node_resources()
    fits = [min(math.floor(float(r.get(name, 0.0)) / need) for name, need in per_group.items()) for r in alive]
    holds = sum(fits)
    if holds >= cluster.num_nodes or not any(fits):
        return ""
    wanted = ", ".join(f"{need:g} {name}" for name, need in per_group.items())
    flags = " ".join(f"--num-{name.lower()}s={need:g}" for name, need in per_group.items() if name in ("CPU", "GPU"))
    return (
        f"the engine plans {cluster.num_nodes} node(s) of {cluster.devices_per_node} {cluster.device_type} devices, "
        f"each on a Ray node of its own with {wanted}, and Ray's {len(alive)} live node(s) hold {holds}: "
        f"{cluster.num_nodes - holds} more Ray node(s) must join (`ray start --address=<head> {flags}`), "
        "or plan fewer nodes (num_nodes, or ENGINE_NUM_NODES for the service)"
    )


def describe_groups(placement: DevicePlacement) -> list[dict[str, Any]]:
    """Per engine node, its group's state and the Ray node holding it (for a report)."""
    out = []
    for node, group in enumerate(placement.groups):
        table = placement_group_table(group)
        held_on = sorted({str(v) for v in table.get("bundles_to_node_id", {}).values() if v})
        out.append({"node": node, "state": table.get("state"), "ray_nodes": held_on})
    return out
