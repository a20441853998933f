"""A job's forecast before it is submitted: simulated for a few steps, extrapolated to the run,
and close to what the simulated engine then does with the whole job."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.job_forecast import forecast_job, own_partition
from jigsaw_engine.control.local_engine import STARTUP_S
from jigsaw_engine.sched.registry import graph_config_for, make_scheduler
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from tests.engine.builders import make_cluster, make_cost, make_spec


def _run_whole(spec_map: dict, steps: int) -> tuple[float, float]:
    """(makespan, billed device-seconds) of the whole job on the service's engine setup."""
    cluster, cost = make_cluster(8), make_cost()
    controller = ClusterController(
        cluster,
        cost,
        scheduler=make_scheduler("jigsaw", cluster, cost),
        graph_config=replace(graph_config_for("jigsaw"), startup_s=STARTUP_S),
    )
    controller.submit("p", make_spec(**spec_map, trainer={"total_steps": steps}))
    makespan = controller.run_until_idle()
    billed = 0.0
    for event in controller.events.since(0, len(controller.events) + 1):
        billed += float(event.data.get("metrics", {}).get("usage/device_seconds", 0.0))
        billed += float(event.data.get("device_seconds", 0.0)) if event.kind.value == "status" else 0.0
    return makespan, billed


def test_forecast_of_a_long_run_lands_near_the_simulated_run() -> None:
    spec = parse_pipeline_spec(make_spec(trainer={"total_steps": 24}))
    found = forecast_job(spec, make_cluster(8))
    assert found.steps == 24 and found.simulated_steps == 6 and found.num_gpus == 2
    assert found.first_step_s > STARTUP_S and found.step_s > 0
    makespan, billed = _run_whole({}, 24)
    assert found.total_s == pytest.approx(makespan, rel=0.1)
    assert found.device_seconds == pytest.approx(billed, rel=0.1)
    assert found.gpu_hours == pytest.approx(found.device_seconds / 3600)


def test_a_short_run_is_simulated_whole_and_matches_exactly() -> None:
    spec = parse_pipeline_spec(make_spec(trainer={"total_steps": 3}))
    found = forecast_job(spec, make_cluster(8))
    makespan, billed = _run_whole({}, 3)
    assert found.simulated_steps == found.steps == 3
    assert found.total_s == pytest.approx(makespan, rel=1e-9)
    assert found.device_seconds == pytest.approx(billed, rel=1e-9)


def test_bigger_batches_and_more_steps_cost_more() -> None:
    small = forecast_job(parse_pipeline_spec(make_spec(trainer={"total_steps": 20})), make_cluster(8))
    longer = forecast_job(parse_pipeline_spec(make_spec(trainer={"total_steps": 40})), make_cluster(8))
    bigger = forecast_job(
        parse_pipeline_spec(make_spec(data={"train_batch_size": 64}, trainer={"total_steps": 20})), make_cluster(8)
    )
    assert longer.total_s - small.total_s == pytest.approx(20 * small.step_s, rel=1e-9)
    assert longer.device_seconds > small.device_seconds
    assert bigger.step_s > small.step_s and bigger.tokens_per_step > small.tokens_per_step


def test_a_clone_is_forecast_for_the_steps_it_has_left() -> None:
    spec = parse_pipeline_spec(make_spec(trainer={"total_steps": 20, "start_step": 15}))
    found = forecast_job(spec, make_cluster(8))
    assert found.steps == 5 and found.simulated_steps == 5


def test_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="steps must be >= 1"):
        forecast_job(parse_pipeline_spec(make_spec()), make_cluster(8), steps=0)


def test_own_partition_is_the_jobs_devices_only() -> None:
    cluster = make_cluster(8)
    assert own_partition(cluster, 2).num_devices == 2
    assert own_partition(ClusterSpec(num_nodes=4, devices_per_node=8, device_type="h100"), 16).num_nodes == 2
    spec = parse_pipeline_spec(make_spec(trainer={"total_steps": 12}))
    busy = forecast_job(spec, own_partition(cluster, 2))
    idle = forecast_job(spec, cluster)
    # Alone on an idle cluster the scheduler lends it idle devices: faster, and billed for them.
    assert idle.step_s < busy.step_s and idle.device_seconds > busy.device_seconds
    # On its own devices it is billed for at most those devices the whole time.
    assert busy.device_seconds <= 2 * busy.total_s * (1 + 1e-9)
