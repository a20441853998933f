"""Real tiny pipelines as Ray actors, driven by the controller through ``RealRuntime``."""

from __future__ import annotations

import time

import pytest

from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.real.jobs import WARMUP_STEPS, RealJobOptions
from jigsaw_engine.real.pipeline_actor import RayExecutor
from jigsaw_engine.real.real_runtime import RealRuntime
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.runtime.ray.placement import ACTOR_SHARE
from jigsaw_engine.sched.registry import make_scheduler, real_graph_config_for
from jigsaw_engine.spec.cluster import ClusterSpec
from tests.ray.conftest import all_cpus_free, eventually, free_cpus

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _spec(name: str, workload: str, seed: int, max_tokens: int) -> dict:
    return {
        "name": name,
        "model": "tiny-qwen2-1m",
        "workload": workload,
        "data": {"train_batch_size": 8},
        "rollout": {"n": 4, "max_response_length": max_tokens},
        "resources": {"num_gpus": 1},
        "trainer": {"total_steps": 2},
        "seed": seed,
    }


def test_two_real_pipelines_share_the_cluster_as_actors(ray_cluster):
    import ray

    # A search reply ("<search>question</search>") needs about 20 tokens.
    specs = {"arith": _spec("arith", "gsm8k", 0, 8), "search": _spec("search", "search", 1, 24)}
    graph_config = real_graph_config_for("jigsaw")
    cluster = ClusterSpec(1, 2, "cpu")
    free_before = all_cpus_free()
    # The shorter warm-up of the other jobs: enough to call the retriever, which is all this needs.
    options = RealJobOptions(warmup_steps=WARMUP_STEPS)
    executor = RayExecutor(specs, train_parts=graph_config.train_minibatches, cluster=cluster, options=options)
    try:
        # The run's two cores are reserved from Ray, each pipeline's process on its own device.
        assert executor.placement is not None
        group = executor.placement.groups[0].id.hex()

        def left(i: int) -> float:
            return float(ray.available_resources().get(f"CPU_group_{i}_{group}", 0.0))

        for i in (0, 1):
            eventually(lambda i=i: left(i) == pytest.approx(1 - ACTOR_SHARE, abs=1e-3), what=f"device {i}'s share")
        eventually(lambda: free_cpus() == free_before - 2, what="the run's two cores reserved")
        cost = RooflineCostModel(load_device_profile("cpu"))
        controller = ClusterController(
            cluster,
            cost,
            runtime=RealRuntime(executor),
            scheduler=make_scheduler("jigsaw", cluster, cost),
            graph_config=graph_config,
        )
        for pid, spec in specs.items():
            controller.submit(pid, spec, schedule=pid == "search")
        controller.run_until_idle()
        metrics = executor.step_metrics()
    finally:
        executor.shutdown()
    assert {pid: controller.state_of(pid).value for pid in specs} == {"arith": "succeeded", "search": "succeeded"}
    eventually(lambda: free_cpus() == free_before, what="the run's cores given back to Ray")
    assert [len(m) for m in metrics.values()] == [2, 2]
    search = metrics["search"]
    # The retrieval pipeline searched for real: its episodes spent time in the BM25 tool.
    assert sum(step["rollout/tool_s"] for step in search) > 0
    assert all(step[names.THROUGHPUT] > 0 for steps in metrics.values() for step in steps)


def test_a_job_killed_mid_step_resumes_with_no_step_lost_or_repeated(ray_cluster, tmp_path):
    """Kill the pipeline's actor while it works through its steps; a new actor on the same
    checkpoint folder resumes after the last finished step and ends with the weights (and the
    per-step rewards) of an uninterrupted run."""
    import ray

    from jigsaw_engine.real.jobs import RealJobOptions
    from jigsaw_engine.real.pipeline_actor import PipelineActor

    spec = _spec("arith", "gsm8k", 7, 8)
    spec["data"] = {"train_batch_size": 16}
    cache = tmp_path / "cache"

    def actor(checkpoints):
        options = RealJobOptions(cache_dir=cache, checkpoint_dir=checkpoints)
        return PipelineActor.options(num_cpus=0).remote(spec, 1, 1, options)

    reference = actor(tmp_path / "reference")
    expected = ray.get(reference.run_steps.remote(4))
    expected_progress = ray.get(reference.progress.remote())
    ray.kill(reference)

    checkpoints = tmp_path / "job"
    doomed = actor(checkpoints)
    ray.get(doomed.progress.remote())  # built
    doomed.run_steps.remote(4)
    deadline = time.monotonic() + 60
    while not (checkpoints / "latest").is_file() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # into the next step
    ray.kill(doomed)
    done_before_kill = int((checkpoints / "latest").read_text().removeprefix("step-"))
    assert 1 <= done_before_kill < 4, "the kill must land while steps remain"

    resumed = actor(checkpoints)
    progress = ray.get(resumed.progress.remote())
    assert progress["resumed_at_step"] == progress["step"] == done_before_kill
    rest = ray.get(resumed.run_steps.remote(4 - done_before_kill))
    final = ray.get(resumed.progress.remote())
    ray.kill(resumed)
    assert final["step"] == 4
    assert final["weights"] == expected_progress["weights"]
    assert [m["training/global_step"] for m in rest] == [float(s) for s in range(done_before_kill + 1, 5)]
    assert [m[names.SCORE_MEAN] for m in rest] == [m[names.SCORE_MEAN] for m in expected[done_before_kill:]]
