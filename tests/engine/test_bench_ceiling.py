"""``jigsaw bench``'s share of each mix's ceiling and its steady-window throughput, in summary.md."""

from __future__ import annotations

from typing import Any

import pytest

from jigsaw_engine.bench.ceiling import ceiling_s, longest_alone_s
from jigsaw_engine.bench.mixes import mix_document
from jigsaw_engine.bench.report import summary_markdown
from jigsaw_engine.bench.suite import SuiteConfig, run_suite

POLICIES = ("verl", "streamrl", "jigsaw")


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    """M1 (synchronous) and M5 (async) at two steps, one seed: enough to see both cases."""
    return run_suite(SuiteConfig(mixes=("M1", "M5"), seeds=(0,), steps=2, policies=POLICIES))


def table_rows(summary: str, heading: str) -> list[list[str]]:
    """The body rows of the first table under ``## heading``, cells stripped."""
    section = summary.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


def test_the_ceiling_is_never_below_the_practical_bound_and_each_share_follows_from_it(
    result: dict[str, Any],
) -> None:
    cell = result["mixes"]["M1"]
    practical = {p: f["share_of_ceiling"] / f["lower_bound_ratio"] for p, f in cell["policies"].items()}
    # share / LB ratio = ceiling / practical bound: the same for every policy, and at least 1.
    assert min(practical.values()) == pytest.approx(max(practical.values()), rel=1e-9)
    assert min(practical.values()) >= 1.0 - 1e-9
    # The lone-pipeline term is measured, not proven: the report says so instead of capping at 1.
    assert all(f["share_of_ceiling"] > 0 for f in cell["policies"].values())


def test_the_ceiling_is_the_larger_of_the_bound_and_the_longest_pipeline_alone() -> None:
    doc = mix_document("M1")
    alone_s, name = longest_alone_s(doc, steps=2, seed=0)
    assert name in {p["name"] for p in doc["pipelines"]}
    assert ceiling_s(doc, alone_s / 2, steps=2, seed=0) == alone_s
    assert ceiling_s(doc, alone_s * 2, steps=2, seed=0) == alone_s * 2


def test_async_mixes_have_no_ceiling(result: dict[str, Any]) -> None:
    assert result["mixes"]["M5"]["ceiling_s"] is None
    assert all(f["share_of_ceiling"] is None for f in result["mixes"]["M5"]["policies"].values())
    with pytest.raises(ValueError, match="synchronous"):
        ceiling_s(mix_document("M5"), 1.0, steps=2, seed=0)


def test_summary_reports_the_share_of_ceiling_of_jigsaw_and_the_best_baseline(result: dict[str, Any]) -> None:
    summary = summary_markdown(result, [])
    assert "measured" in summary.split("## Share of ceiling", 1)[1].split("\n## ", 1)[0]
    rows = {row[0]: row for row in table_rows(summary, "Share of ceiling")}
    assert set(rows) == {"M1"}  # the async mix has no ceiling
    f = result["mixes"]["M1"]["policies"]
    best = max(("verl", "streamrl"), key=lambda b: f[b]["throughput_tokens_per_s"])
    assert rows["M1"][1] == f"{result['mixes']['M1']['ceiling_s']:,.0f}"
    assert rows["M1"][2:] == [f"{f['jigsaw']['share_of_ceiling']:.1%}", best, f"{f[best]['share_of_ceiling']:.1%}"]


def test_summary_reports_steady_window_throughput_beside_the_makespan_throughput(result: dict[str, Any]) -> None:
    rows = table_rows(summary_markdown(result, []), "Steady window (every pipeline still running)")
    assert [(r[0], r[1]) for r in rows] == [(m, p) for m in ("M1", "M5") for p in POLICIES]
    steady_seen = 0
    for mix, policy, makespan, steady, _, window in rows:
        f = result["mixes"][mix]["policies"][policy]
        assert makespan == f"{f['throughput_tokens_per_s']:,.0f}"
        if f["steady_throughput_tokens_per_s"] is None:
            assert steady == window == "n/a"
            continue
        steady_seen += 1
        assert steady == f"{f['steady_throughput_tokens_per_s']:,.0f}"
        if mix == "M1":  # one seed: the makespan is the ceiling over the share
            makespan_s = result["mixes"][mix]["ceiling_s"] / f["share_of_ceiling"]
            window_s = f["steady_window_s"]
            assert window_s <= makespan_s * (1 + 1e-9)
            # The window's tokens are some of the run's.
            assert (
                window_s * f["steady_throughput_tokens_per_s"] <= makespan_s * f["throughput_tokens_per_s"] * 1.000001
            )
    assert steady_seen > 0


def test_a_run_of_ablations_without_jigsaw_still_writes_its_summary() -> None:
    """An ablation's column is read against full jigsaw; without jigsaw in the run the summary
    leaves the ablations table out instead of failing."""
    alone = run_suite(SuiteConfig(mixes=("M1",), seeds=(0,), steps=2, policies=("verl", "greedy")))
    summary = summary_markdown(alone, [])
    assert "## Ablations" not in summary
    assert "greedy" in summary
