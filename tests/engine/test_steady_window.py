"""A fixed mix's throughput while every pipeline runs, beside the makespan's."""

from __future__ import annotations

import pytest

from jigsaw_engine.bench.simulate import simulate_workload
from jigsaw_engine.bench.steady_window import steady_throughput, steady_window
from jigsaw_engine.control.run_record import RunRecord
from jigsaw_engine.control.verl_estimate import FinishedStep
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.workload_file import WorkloadFile
from tests.engine.builders import make_spec

SPEC = parse_pipeline_spec(make_spec())


def record(order: int, started_s: float, ended_s: float) -> RunRecord:
    return RunRecord(SPEC, order, started_s=started_s, ended_s=ended_s)


def step(pid: str, start_s: float, end_s: float, tokens: int) -> FinishedStep:
    nan = float("nan")
    return FinishedStep(pid, 1, start_s, end_s, tokens, 0.0, 1, nan, nan)


def test_the_window_runs_from_the_last_start_to_the_first_end_and_counts_tokens_pro_rata() -> None:
    runs = {"a": record(1, 0.0, 100.0), "b": record(2, 20.0, 60.0)}
    assert steady_window(runs) == (20.0, 60.0)
    steps = [
        step("a", 0.0, 40.0, 400),  # half in the window
        step("a", 40.0, 100.0, 600),  # a third in the window
        step("b", 20.0, 60.0, 800),  # all of it
        step("gone", 20.0, 60.0, 10_000),  # not one of these runs
    ]
    found = steady_throughput(runs, steps)
    assert found == pytest.approx({"tokens_per_s": (200 + 200 + 800) / 40.0, "window_s": 40.0})


def test_pipelines_one_after_another_have_no_window() -> None:
    runs = {"a": record(1, 0.0, 50.0), "b": record(2, 50.0, 90.0)}
    assert steady_window(runs) is None
    assert steady_throughput(runs, [step("a", 0.0, 50.0, 10)]) is None


def test_simulate_reports_it_beside_the_makespan_throughput() -> None:
    pipelines = [
        make_spec(name="short", trainer={"total_steps": 2}),
        make_spec(name="long", trainer={"total_steps": 6}),
    ]
    workload = WorkloadFile(ClusterSpec(1, 4, "h100"), pipelines)
    result = simulate_workload(workload, ["verl-dedicated", "verl-serial"], steps=None, seed=0, timing=False)
    dedicated, serial = result["policies"]["verl-dedicated"], result["policies"]["verl-serial"]
    # While both run, both train: faster than over the makespan, whose tail has one alone.
    assert dedicated["steady_throughput_tokens_per_s"] > dedicated["throughput_tokens_per_s"]
    assert 0 < dedicated["steady_window_s"] < dedicated["makespan_s"]
    assert serial["steady_throughput_tokens_per_s"] is None and serial["steady_window_s"] is None
