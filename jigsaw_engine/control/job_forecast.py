"""A job's forecast before it is submitted: how long a step takes, how long the whole run takes
and how many device-seconds it will be billed, from the same simulator the engine runs.

The job is simulated for its first few steps (sampled sequences, cost model, the service's
scheduler, graph options and startup time: everything the simulated engine does) and the rest
is extrapolated at the pace of the steps after the first: the first carries the startup, later
ones repeat each other closely (the same prompts per step, slowly drifting lengths).

Where it is simulated decides what the forecast means. On a partition of only its own
``num_gpus`` devices (:func:`own_partition`) it is the job on a busy cluster, where every other
device is held: the service's usual case, and the one its estimate reports. Alone on the whole
cluster it is the best case: the scheduler lends it idle devices, so it runs faster and is
billed for the devices it borrows. ``scripts/estimate_error.py`` measures both against runs of
the built-in mixes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jigsaw_engine.contracts import EventKind
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.local_engine import STARTUP_S
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.sched.registry import graph_config_for, make_scheduler, real_graph_config_for
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec

FORECAST_STEPS = 6
"""Steps simulated before extrapolating: the first (startup, cold predictions) and enough after
it to average one step's sampling noise. Cheap: a fraction of a second for the presets."""

SERVICE_SCHEDULER = "jigsaw"
"""The scheduler the service's engine runs (``LocalEngine``'s default)."""


@dataclass(frozen=True, slots=True)
class JobForecast:
    device_type: str
    num_gpus: int
    steps: int
    """Steps the job will train (``total_steps`` less a clone's ``start_step``)."""
    simulated_steps: int
    first_step_s: float
    """From admission to the end of the first step: startup included."""
    step_s: float
    """Engine seconds per step once running (async steps overlap: the pace, not one step's latency)."""
    total_s: float
    """From admission to the last step's end."""
    device_seconds: float
    """What the job would be billed: device time weighted by share, as the usage ledger counts it."""
    tokens_per_step: float

    @property
    def gpu_hours(self) -> float:
        return self.device_seconds / 3600.0


def own_partition(cluster: ClusterSpec, num_gpus: int) -> ClusterSpec:
    """``num_gpus`` devices of ``cluster``'s type: whole nodes where they fill nodes, else one."""
    per_node = cluster.devices_per_node
    if num_gpus > per_node and num_gpus % per_node == 0:
        return replace(cluster, num_nodes=num_gpus // per_node)
    return replace(cluster, num_nodes=1, devices_per_node=num_gpus)


def forecast_job(
    spec: PipelineSpec, cluster: ClusterSpec, *, real: bool = False, steps: int = FORECAST_STEPS
) -> JobForecast:
    """``spec`` simulated alone on ``cluster`` for ``steps`` steps and extrapolated to its whole
    run. ``real``: the engine trains jobs for real, and plans them with the real graph options."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    graph = (
        replace(real_graph_config_for(SERVICE_SCHEDULER), prefix_cache=False)
        if real
        else graph_config_for(SERVICE_SCHEDULER)
    )
    controller = ClusterController(
        cluster,
        cost,
        scheduler=make_scheduler(SERVICE_SCHEDULER, cluster, cost, real_pipelines=real),
        graph_config=replace(graph, startup_s=STARTUP_S),
    )
    remaining = spec.total_steps - spec.start_step
    simulated = min(steps, remaining)
    controller.submit("forecast", replace(spec, total_steps=spec.start_step + simulated))
    makespan = controller.run_until_idle()
    ends: list[float] = []
    device_s: list[float] = []
    tokens = 0.0
    outside_steps_s = 0.0  # device time a status event billed (a run's end after its last step)
    for event in controller.events.since(0, len(controller.events) + 1):
        if event.kind is EventKind.METRICS:
            metrics = event.data["metrics"]
            ends.append(event.sim_time_s)
            device_s.append(float(metrics["usage/device_seconds"]))
            tokens += float(metrics["perf/total_num_tokens"])
        elif event.kind is EventKind.STATUS:
            outside_steps_s += float(event.data.get("device_seconds", 0.0))
    if len(ends) != simulated:
        state = controller.pipeline_states().get("forecast", "gone")
        raise RuntimeError(f"the forecast's simulation finished {len(ends)} of {simulated} steps ({state})")
    if simulated > 1:
        step_s = (ends[-1] - ends[0]) / (simulated - 1)
        step_device_s = sum(device_s[1:]) / (simulated - 1)
    else:
        step_s, step_device_s = ends[0], sum(device_s)
    extra = remaining - simulated
    return JobForecast(
        device_type=cluster.device_type,
        num_gpus=spec.resources.num_gpus,
        steps=remaining,
        simulated_steps=simulated,
        first_step_s=ends[0],
        step_s=step_s,
        total_s=makespan + extra * step_s,
        device_seconds=sum(device_s) + outside_steps_s + extra * step_device_s,
        tokens_per_step=tokens / simulated,
    )
