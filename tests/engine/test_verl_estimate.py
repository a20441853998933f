"""The cluster page's "throughput against verl (estimated)": each finished step re-costed as
verl would run it, from the same sampled sequences and cost model."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from jigsaw_engine.bench.mixes import build_mix
from jigsaw_engine.bench.simulate import POLICIES, prepare, run_policy
from jigsaw_engine.control.cluster_controller import ClusterController
from jigsaw_engine.control.verl_estimate import FinishedStep, verl_comparison
from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import load_device_profile
from jigsaw_engine.sched.registry import graph_config_for, make_scheduler
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from tests.engine.builders import make_cluster, make_cost, make_spec


def test_verl_measured_against_its_own_estimate_reads_one() -> None:
    # verl itself (dedicated scheduler, verl's graph, synchronous) on the whole cluster: the
    # estimate must reproduce the time it really took, step for step.
    cluster = make_cluster(8)
    controller = ClusterController(cluster, make_cost(), estimate_verl=True)
    controller.submit("p", make_spec(resources={"num_gpus": 8}, trainer={"total_steps": 3}))
    makespan = controller.run_until_idle()
    window = controller.timeline_window(makespan + 1)
    estimate = window["verl_estimate"]
    assert estimate["steps"] == 3 and len(window["steps"]) == 3
    assert estimate["speedup"] == pytest.approx(1.0, rel=1e-9)
    assert estimate["actual_s"] == pytest.approx(makespan, rel=1e-9)
    assert estimate["tokens"] == sum(s["tokens"] for s in window["steps"]) > 0
    assert window["peak_flops"] == make_cost().device.peak_flops_bf16
    step = window["steps"][0]
    assert step["pipeline_id"] == "p" and step["step"] == 1
    assert step["flops"] == pytest.approx(6.0 * 1.5e9 * step["tokens"], rel=0.05)  # qwen2.5-1.5b


@pytest.mark.parametrize("mix", ["M0", "M3"])
def test_estimate_matches_simulating_verl_on_the_same_workload(mix: str) -> None:
    # The service's scheduler runs a benchmark mix; the estimate read off its timeline must
    # equal what simulating verl (the better of its two deployments) on the same specs and
    # seeds gives. These mixes' partitions fill the cluster exactly, so the bound is tight.
    workload = build_mix(mix)
    cluster = workload.cluster
    cost = RooflineCostModel(load_device_profile(cluster.device_type))
    specs = prepare(workload, steps=2, seed=0)
    controller = ClusterController(
        cluster,
        cost,
        scheduler=make_scheduler("jigsaw", cluster, cost),
        graph_config=graph_config_for("jigsaw"),
        estimate_verl=True,
    )
    for pid, spec in specs.items():
        controller.submit(pid, spec, schedule=False)
    makespan = controller.run_until_idle()
    verl_s = min(run_policy(POLICIES[p], cluster, specs).makespan_s for p in ("verl-dedicated", "verl-serial"))
    estimate = controller.timeline_window(makespan + 1)["verl_estimate"]
    assert estimate["speedup"] == pytest.approx(verl_s / makespan, rel=1e-6)


def test_estimate_never_flatters_the_cluster_when_verl_partitions_do_not_fit() -> None:
    # 10 GPUs asked of 8: verl would have to queue one job; the estimate packs its partitions
    # perfectly instead, so verl's estimated time is at most its simulated time.
    cluster, cost = make_cluster(8), make_cost()
    specs = {
        "a": parse_pipeline_spec(make_spec(resources={"num_gpus": 4}, trainer={"total_steps": 3}, seed=1)),
        "b": parse_pipeline_spec(
            make_spec(resources={"num_gpus": 4}, workload="math", rollout={"max_response_length": 4096}, seed=2)
        ),
        "c": parse_pipeline_spec(make_spec(resources={"num_gpus": 2}, trainer={"total_steps": 3}, seed=3)),
    }
    controller = ClusterController(
        cluster,
        cost,
        scheduler=make_scheduler("jigsaw", cluster, cost),
        graph_config=graph_config_for("jigsaw"),
        estimate_verl=True,
    )
    for pid, spec in specs.items():
        controller.submit(pid, spec, schedule=False)
    makespan = controller.run_until_idle()
    simulated = run_policy(POLICIES["verl-dedicated"], cluster, specs).makespan_s
    estimate = controller.timeline_window(makespan + 1)["verl_estimate"]
    assert estimate["verl_dedicated_s"] <= simulated + 1e-6
    assert estimate["speedup"] <= min(simulated, estimate["verl_serial_s"]) / makespan + 1e-9


def _step(pid: str, start: float, end: float, verl: float, gpus: int = 4) -> FinishedStep:
    return FinishedStep(pid, 1, start, end, 100, 6e11, gpus, verl, 2 * verl)


def test_idle_time_between_busy_periods_counts_for_neither() -> None:
    # a ran alone, the cluster sat idle, then b ran alone: 20 s of work, not 30.
    out = verl_comparison([_step("a", 0, 10, 12), _step("b", 20, 30, 15)], num_devices=8)
    assert out["actual_s"] == 20
    assert out["verl_s"] == 27  # each period: its own pipeline's chain
    assert out["speedup"] == pytest.approx(27 / 20)
    # Overlapping steps are one period: the chains of a and b run side by side on 4 + 4 GPUs.
    both = verl_comparison([_step("a", 0, 10, 12), _step("b", 5, 12, 15)], num_devices=8)
    assert both["actual_s"] == 12 and both["verl_s"] == 15


def test_no_estimate_without_finished_steps_or_for_real_runs() -> None:
    assert verl_comparison([], 8) == {
        "speedup": None,
        "actual_s": 0.0,
        "verl_s": 0.0,
        "verl_dedicated_s": 0.0,
        "verl_serial_s": 0.0,
        "steps": 0,
        "tokens": 0,
        "note": "no step finished in this window",
    }
    real = replace(_step("a", 0, 10, 12), verl_dedicated_s=math.nan, verl_serial_s=math.nan)
    out = verl_comparison([real], 8)
    assert out["speedup"] is None and "real runs" in out["note"]


def test_benchmark_controllers_skip_the_estimate() -> None:
    controller = ClusterController(make_cluster(8), make_cost())
    controller.submit("p", make_spec(trainer={"total_steps": 1}))
    controller.run_until_idle()
    window = controller.timeline_window(controller.now_s + 1)
    assert len(window["steps"]) == 1 and window["verl_estimate"]["speedup"] is None


def test_the_window_holds_only_steps_that_ended_in_it() -> None:
    controller = ClusterController(make_cluster(8), make_cost(), estimate_verl=True)
    controller.submit("p", make_spec(trainer={"total_steps": 3}))
    controller.run_until_idle()
    ends = [s.end_s for s in controller.finished_steps]
    window = controller.timeline_window(controller.now_s - (ends[0] + ends[1]) / 2)
    assert [s["step"] for s in window["steps"]] == [2, 3]
    assert window["verl_estimate"]["steps"] == 2
