"""A composite's serial deployment is skipped only where it provably loses (issue 38, item 3)."""

from __future__ import annotations

from typing import Any

import pytest

from jigsaw_engine.bench.simulate import POLICIES, prepare, run_policy, serial_throughput_bound, simulate_workload
from jigsaw_engine.spec.workload_file import WorkloadFile, parse_workload
from tests.engine.builders import make_spec

SERIAL = ("verl-serial", "streamrl-serial", "areal-serial")


def _async(name: str, seed: int, **overrides: Any) -> dict[str, Any]:
    return make_spec(name=name, seed=seed, mode="async", staleness=2, trainer={"total_steps": 2}, **overrides)


def _workload(*pipelines: dict[str, Any], gpus: int = 8) -> WorkloadFile:
    return parse_workload({"cluster": {"num_nodes": 1, "devices_per_node": gpus}, "pipelines": list(pipelines)})


SHARED = _workload(
    _async("a", 1, workload="math"), _async("b", 2), _async("c", 3, model="qwen3-0.6b"), _async("d", 4, workload="math")
)
"""Four jobs on two devices each: one after another they would leave most devices idle."""
ALONE = _workload(_async("solo", 5, workload="math", resources={"num_gpus": 2}), gpus=4)
"""One job asking for half of the cluster: all of it, serially, is faster."""


@pytest.mark.parametrize("workload", [SHARED, ALONE], ids=["shared", "alone"])
def test_no_serial_run_beats_its_bound(workload: WorkloadFile) -> None:
    specs = prepare(workload, steps=None, seed=0)
    for name in SERIAL:
        run = run_policy(POLICIES[name], workload.cluster, specs)
        tokens = sum(r.tokens for r in run.controller.finished_runs().values())
        assert tokens / run.makespan_s <= serial_throughput_bound(POLICIES[name], workload.cluster, specs), name


@pytest.mark.parametrize(("workload", "skipped"), [(SHARED, set(SERIAL)), (ALONE, set())], ids=["shared", "alone"])
def test_skipping_a_serial_member_changes_nothing_reported(workload: WorkloadFile, skipped: set[str]) -> None:
    def compare(exhaustive: bool) -> tuple[dict[str, Any], set[str]]:
        ran: set[str] = set()
        report = simulate_workload(
            workload,
            ["verl", "streamrl", "areal"],
            steps=None,
            seed=0,
            timing=False,
            exhaustive=exhaustive,
            on_run=lambda name, run: ran.add(name),
        )
        return report, ran

    pruned, ran = compare(exhaustive=False)
    exhaustive, ran_all = compare(exhaustive=True)
    assert pruned == exhaustive
    assert ran_all - ran == skipped
    chosen = {figures["chosen"] for figures in exhaustive["policies"].values()}
    assert chosen.isdisjoint(skipped)
    if not skipped:  # the case where serial is kept is one where it wins
        assert chosen & set(SERIAL)


def test_a_serial_member_asked_for_by_name_always_runs() -> None:
    ran: set[str] = set()
    report = simulate_workload(
        SHARED, ["areal", "areal-serial"], steps=None, seed=0, timing=False, on_run=lambda name, run: ran.add(name)
    )
    assert ran == {"areal-dedicated", "areal-serial"}
    assert report["policies"]["areal"]["chosen"] == "areal-dedicated"
