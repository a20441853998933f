"""The engine as its Ray actor runs it in real mode: each job in a process of its own, each of its
rollout workers and its environment in others, all freed when the job ends; a job whose process, or one of
whose rollout workers' processes, is killed mid-step is handed back and resumes from its
checkpoint with no step lost or repeated."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from jigsaw_engine.api import EngineConfig, start_local_engine
from jigsaw_engine.contracts import EngineHost, EventKind
from tests.processes import ray_actor_processes
from tests.ray.conftest import all_cpus_free, eventually, free_cpus
from tests.train.test_real_runtime import tiny_spec
from tests.train.test_real_service import wait_until_ended

pytestmark = pytest.mark.slow


def processes(actor: str = "PipelineActor") -> set[int]:
    return ray_actor_processes(actor)


def pipeline_processes() -> set[int]:
    return processes("PipelineActor")


def rollout_processes() -> set[int]:
    return processes("RolloutEngineActor")


def environment_processes() -> set[int]:
    return processes("EnvironmentActor")


def real_engine(tmp_path: Path, policies: Path) -> EngineHost:
    config = EngineConfig.from_mapping(
        {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"},
        mode="real",
        real_cache_dir=str(policies),
        real_checkpoint_dir=str(tmp_path / "checkpoints"),
    )
    return start_local_engine(config, pipeline_actors=True)


def wait_for(condition, timeout_s: float = 120, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def seen_until(current, count: int, what: str, timeout_s: float = 120) -> set[int]:  # type: ignore[no-untyped-def]
    """Every process ``current()`` has shown until ``count`` distinct ones have been seen."""
    seen: set[int] = set()

    def enough() -> set[int] | None:
        seen.update(current())
        return seen if len(seen) >= count else None

    return wait_for(enough, timeout_s, what)


def steps_reported(engine: EngineHost, pipeline_id: str) -> list[int]:
    events = engine.events_since(0, 100_000).events
    return [e.data["step"] for e in events if e.pipeline_id == pipeline_id and e.kind is EventKind.METRICS]


def test_each_real_job_runs_in_its_own_process_which_goes_when_the_job_ends(
    ray_cluster, tmp_path: Path, tiny_policy_cache: Path
) -> None:
    before, rollouts_before, envs_before = pipeline_processes(), rollout_processes(), environment_processes()
    cpus_before = all_cpus_free()
    engine = real_engine(tmp_path, tiny_policy_cache)
    try:
        engine.submit("math", tiny_spec("math", steps=2))
        engine.submit("refine", tiny_spec("refine", workload="aime_refine", steps=2, seed=1))
        # Counted as seen, not as alive at one moment: on a busy host one two-step job may end
        # (and its processes exit) before the other's have all started.
        during = seen_until(lambda: pipeline_processes() - before, 2, "two job processes")
        # A rollout worker per core for each job (a step may run on both cores), in its own process.
        rollouts = seen_until(lambda: rollout_processes() - rollouts_before, 4, "four rollout worker processes")
        # An environment each (its tools and graders), started with the job's workers.
        envs = seen_until(lambda: environment_processes() - envs_before, 2, "two environment processes")
        # While jobs run, the engine's two cores are reserved from Ray ...
        eventually(lambda: free_cpus() == cpus_before - 2, what="the engine's two cores reserved")
        events = wait_until_ended(engine, {"math", "refine"})
        wait_for(lambda: not (pipeline_processes() & during), 30, "the jobs' processes to exit")
        wait_for(lambda: not (environment_processes() & envs), 30, "the environments' processes to exit")
        wait_for(lambda: not (rollout_processes() & rollouts), 30, "the rollout workers' processes to exit")
        # ... and an idle engine gives them back.
        wait_for(lambda: free_cpus() == cpus_before, 30, "the engine's cores to be given back to Ray")
    finally:
        engine.close()
    for pid in ("math", "refine"):
        mine = [e for e in events if e.pipeline_id == pid]
        assert [e.data["status"] for e in mine if e.kind is EventKind.STATUS][-1] == "succeeded"
        assert [e.data["step"] for e in mine if e.kind is EventKind.METRICS] == [1, 2]
        assert [e.data["step"] for e in mine if e.kind is EventKind.SAMPLES] == [1, 2]


@pytest.mark.parametrize("victim", ["PipelineActor", "RolloutEngineActor"])
def test_a_job_whose_process_is_killed_mid_step_is_handed_back_and_resumes_from_its_checkpoint(
    ray_cluster, tmp_path: Path, tiny_policy_cache: Path, victim: str
) -> None:
    before = processes(victim)
    engine = real_engine(tmp_path, tiny_policy_cache)
    try:
        engine.submit("math", tiny_spec("math", steps=4))
        wait_for(lambda: steps_reported(engine, "math"), what="the first step")
        os.kill(min(processes(victim) - before), signal.SIGKILL)  # during step 2 (a step takes about a second)
        wait_for(lambda: "math" not in engine.pipeline_states(), 60, "the job to be handed back")
        done = steps_reported(engine, "math")
        assert done[-1] < 4, "the kill must land while steps remain"
        events = engine.events_since(0, 100_000).events
        assert any(e.kind is EventKind.LOG and "worker lost" in e.data["message"] for e in events)
        assert not [e for e in events if e.kind is EventKind.STATUS and e.data["status"] == "failed"]

        # What the control plane's reconciler does: submit it again after its last stored step.
        resumed = tiny_spec("math", steps=4)
        resumed["trainer"]["start_step"] = done[-1]
        engine.submit("math", resumed)
        events = wait_until_ended(engine, {"math"})
    finally:
        engine.close()
    steps = [e.data["step"] for e in events if e.pipeline_id == "math" and e.kind is EventKind.METRICS]
    assert steps == list(range(1, 5)), steps  # each step once: none lost, none repeated
    assert [e.data["status"] for e in events if e.pipeline_id == "math" and e.kind is EventKind.STATUS][-1] == (
        "succeeded"
    )


def test_a_job_the_ray_cluster_has_no_room_for_fails_saying_why(
    ray_cluster, tmp_path: Path, tiny_policy_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine plans three cores; the session's Ray cluster has two. The job fails with the
    fix in its reason (it is not left waiting on Ray), and nothing stays reserved."""
    from jigsaw_engine.runtime.ray import placement

    monkeypatch.setattr(placement, "READY_TIMEOUT_S", 1.0)
    cpus_before = all_cpus_free()
    config = EngineConfig.from_mapping(
        {"num_nodes": 1, "devices_per_node": 3, "device_type": "cpu"},
        mode="real",
        real_cache_dir=str(tiny_policy_cache),
        real_checkpoint_dir=str(tmp_path / "checkpoints"),
    )
    engine = start_local_engine(config, pipeline_actors=True)
    try:
        engine.submit("math", tiny_spec("math", steps=2))
        events = wait_until_ended(engine, {"math"}, timeout_s=60)
    finally:
        engine.close()
    failed = [e.data for e in events if e.kind is EventKind.STATUS and e.data["status"] == "failed"]
    assert failed, "the job must fail, not wait for cores Ray does not have"
    assert "cluster.devices_per_node" in failed[-1]["reason"]
    assert "ENGINE_DEVICES_PER_NODE" in failed[-1]["reason"]
    wait_for(lambda: free_cpus() == cpus_before, 30, "nothing left reserved")
