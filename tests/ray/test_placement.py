"""The engine's devices reserved from Ray: held while a run needs them, given back after, actors
placed in their device's bundle with a fraction of it, and a Ray cluster too small refused with
the fix. The session's Ray cluster has 2 CPUs (tests/ray_fixture.py)."""

from __future__ import annotations

import pytest
import ray

from jigsaw_engine.errors import SpecError
from jigsaw_engine.runtime.ray.placement import ACTOR_SHARE, DevicePlacement
from jigsaw_engine.spec.cluster import ClusterSpec
from tests.ray.conftest import all_cpus_free, eventually, free_cpus

pytestmark = pytest.mark.ray


@ray.remote
class Resident:
    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def niceness(self) -> int:
        import os

        return os.nice(0)


def bundle_free(placement: DevicePlacement, node: int, index: int) -> float:
    """What is left of one device's bundle (Ray names it ``CPU_group_<index>_<group id>``; it
    keeps four decimals)."""
    key = f"CPU_group_{index}_{placement.groups[node].id.hex()}"
    return float(ray.available_resources().get(key, 0.0))


def test_the_devices_are_held_for_the_engine_and_its_actors_share_them(ray_cluster) -> None:
    before = all_cpus_free()
    placement = DevicePlacement(ClusterSpec(1, 2, "cpu"))
    try:
        # Both cores are the engine's now: nothing else on this Ray cluster can book them.
        eventually(lambda: free_cpus() == before - 2)
        # Two pipelines' processes on device 0 (co-located), one on device 1.
        residents = [Resident.options(**placement.actor_options(d)).remote() for d in (0, 0, 1)]
        nodes = ray.get([r.node.remote() for r in residents])
        assert len(set(nodes)) == 1
        eventually(lambda: bundle_free(placement, 0, 0) == pytest.approx(1 - 2 * ACTOR_SHARE, abs=1e-3))
        eventually(lambda: bundle_free(placement, 0, 1) == pytest.approx(1 - ACTOR_SHARE, abs=1e-3))
        # A device id past the cluster wraps round, as the executors map devices to cores.
        assert placement.actor_options(2)["scheduling_strategy"].placement_group_bundle_index == 0
        for resident in residents:
            ray.kill(resident)
    finally:
        placement.remove()
    eventually(lambda: free_cpus() == before)


def test_a_ray_cluster_too_small_for_the_plan_is_refused_with_the_fix(ray_cluster) -> None:
    before = all_cpus_free()
    with pytest.raises(SpecError) as caught:
        DevicePlacement(ClusterSpec(1, 3, "cpu"), timeout_s=1.0)
    (error,) = caught.value.errors
    assert error.field == "cluster.devices_per_node"
    assert "1 node(s) of 3 cpu devices" in error.message
    assert "Ray has 2 CPU" in error.message
    assert "--num-cpus" in error.message and "ENGINE_DEVICES_PER_NODE" in error.message
    # Nothing half-reserved is left behind.
    eventually(lambda: free_cpus() == before)


def test_a_device_s_work_runs_at_the_host_s_normal_priority(ray_cluster) -> None:
    """Ray would start its workers at nice 15, where any other process that wakes preempts a
    node's torch threads; the engine's run at nice 0 (on a Ray started with `ray start` too:
    ``tests/ray/node_loss.py`` checks that). This Ray already starts its workers at nice 0, so
    the actors ask for no runtime env of their own and Ray may hand them its idle workers."""
    placement = DevicePlacement(ClusterSpec(1, 2, "cpu"))
    try:
        options = placement.actor_options(1)
        assert "runtime_env" not in options
        resident = Resident.options(**options).remote()
        assert ray.get(resident.niceness.remote()) == 0
    finally:
        placement.remove()
