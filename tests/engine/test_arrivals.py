"""A day of arrivals: the generator's statistics, the file's checks, and a small day simulated
under two policies with the service's admission (sane figures, the same figures for the same
seed)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jigsaw_engine.bench.arrivals_file import parse_arrivals
from jigsaw_engine.bench.arrivals_gen import (
    PEAK_HOUR,
    PEAK_TO_TROUGH,
    ArrivalsConfig,
    _arrival_time,
    generate_arrivals,
)
from jigsaw_engine.bench.arrivals_report import jain_index, simulate_arrivals, weighted_fair_split
from jigsaw_engine.bench.arrivals_suite import run_arrivals_suite
from jigsaw_engine.cli import main
from jigsaw_engine.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
SMALL = ArrivalsConfig(num_nodes=2, day_s=600.0, load=0.8, tenants=3, seed=1)
"""16 H100s, a day shortened to 10 minutes: about a dozen jobs, seconds to simulate."""


@pytest.fixture(scope="module")
def small_day() -> dict:  # type: ignore[type-arg]
    return generate_arrivals(SMALL)


def test_arrivals_follow_the_daily_cycle() -> None:
    rng = random.Random(0)
    day_s = 86400.0
    hours = [int(_arrival_time(rng, day_s) // 3600) for _ in range(6000)]
    near_peak = sum(1 for h in hours if abs(h + 0.5 - PEAK_HOUR) <= 2)
    near_trough = sum(1 for h in hours if abs((h + 0.5 - PEAK_HOUR) % 24 - 12) <= 2)
    assert near_peak / near_trough == pytest.approx(PEAK_TO_TROUGH, rel=0.25)


def test_a_day_is_drawn_at_the_offered_load_asked_for(small_day: dict) -> None:  # type: ignore[type-arg]
    for load in (0.6, 1.0):
        doc = generate_arrivals(ArrivalsConfig(num_nodes=2, day_s=600.0, load=load, seed=3))
        assert doc["source"]["offered_load"] == pytest.approx(load, rel=0.2)
    arrivals = parse_arrivals(small_day)
    assert len(arrivals.tenants) == 3
    assert sum(t.guarantee_gpus for t in arrivals.tenants) <= arrivals.cluster.num_devices
    assert all(0 <= j.arrival_s < arrivals.day_s for j in arrivals.jobs)
    assert [j.arrival_s for j in arrivals.jobs] == sorted(j.arrival_s for j in arrivals.jobs)
    for j in arrivals.jobs:
        assert j.spec.resources.num_gpus % j.spec.resources.tp == 0
        assert j.spec.total_steps >= 2
    assert {j.tenant for j in arrivals.jobs} <= {t.name for t in arrivals.tenants}


def test_the_same_seed_draws_the_same_day_and_another_seed_another() -> None:
    again = generate_arrivals(SMALL)
    assert generate_arrivals(SMALL) == again
    other = generate_arrivals(ArrivalsConfig(num_nodes=2, day_s=600.0, load=0.8, tenants=3, seed=2))
    assert other["jobs"] != again["jobs"]


def test_a_bad_arrivals_file_names_every_problem(small_day: dict) -> None:  # type: ignore[type-arg]
    doc = json.loads(json.dumps(small_day))
    doc["jobs"][0]["tenant"] = "nobody"
    doc["jobs"][1]["pipeline"]["model"] = "qwen9-999b"
    doc["tenants"][0]["guarantee_gpus"] = 16
    doc["tenants"][1]["guarantee_gpus"] = 16
    with pytest.raises(SpecError) as caught:
        parse_arrivals(doc)
    fields = {e.field for e in caught.value.errors}
    assert {"jobs[0].tenant", "jobs[1].pipeline.model", "tenants"} <= fields


def test_fair_split_and_jain() -> None:
    # b asks for less than its weight's share: it gets what it asked, a and c split the rest 2:1.
    split = weighted_fair_split(90.0, {"a": 100.0, "b": 10.0, "c": 100.0}, {"a": 2.0, "b": 1.0, "c": 1.0})
    assert split == pytest.approx({"a": 53.333, "b": 10.0, "c": 26.667}, rel=1e-3)
    assert jain_index([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0]) == pytest.approx(1 / 3)


def test_a_small_day_runs_every_job_with_sane_figures_and_again_the_same(small_day: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    arrivals = parse_arrivals(small_day)
    result, runs = simulate_arrivals(arrivals, ["verl-dedicated", "jigsaw"])
    for name, r in result["policies"].items():
        assert r["jobs_finished"] == r["jobs"] == len(arrivals.jobs), name
        assert r["goodput_tokens_per_s"] > 0
        assert 0.0 < r["utilisation"] <= 1.0
        assert 0.0 <= r["queueing_delay_s"]["mean"] <= r["queueing_delay_s"]["p95"]
        assert r["queueing_delay_s"]["mean"] < r["jct_s"]["mean"] <= r["jct_s"]["p95"]
        assert 0.0 < r["tenants"]["jain_index"] <= 1.0
        shares = [t["share"] for t in r["tenants"]["by_tenant"].values()]
        assert sum(shares) == pytest.approx(1.0)
        # Admission never hands out more GPUs than the cluster has.
        assert max(g for _, g in runs[name].held_samples) <= arrivals.cluster.num_devices
    # verl runs each job alone on its own GPUs: no job takes much longer than its estimate.
    assert result["policies"]["verl-dedicated"]["missed_estimate"]["count"] <= 1
    # Again in another process, whose string hashes (and so set orders) differ: the same figures.
    day, out = tmp_path / "day.json", tmp_path / "out.json"
    day.write_text(json.dumps(small_day))
    command = ["simulate", "--arrivals", str(day), "--policies", "verl-dedicated,jigsaw", "--json", str(out)]
    subprocess.run(
        [sys.executable, "-m", "jigsaw_engine.cli", *command],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        cwd=ROOT,
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))


def test_the_commands_draw_a_day_and_simulate_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    day = tmp_path / "day.yaml"
    args = ["arrivals", "--out", str(day), "--load", "0.6", "--nodes", "1", "--day-s", "300", "--tenants", "3"]
    assert main(args) == 0
    assert yaml.safe_load(day.read_text())["source"]["target_load"] == 0.6
    out, picture = tmp_path / "out.json", tmp_path / "day.png"
    simulate = ["simulate", "--arrivals", str(day), "--policies", "verl-dedicated", "--json", str(out)]
    assert main([*simulate, "--plot", str(picture)]) == 0
    printed = capsys.readouterr().out
    assert "verl-dedicated" in printed and "Jain" in printed
    assert set(json.loads(out.read_text())["policies"]) == {"verl-dedicated"}
    assert picture.read_bytes().startswith(b"\x89PNG")


def test_the_commands_refuse_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arrivals", "--out", str(tmp_path / "d.yaml"), "--load", "3"]) == 2
    assert "--load" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"cluster": {"num_nodes": 1}, "tenants": [], "jobs": []}))
    assert main(["simulate", "--arrivals", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "tenants" in err and "jobs" in err
    assert main(["simulate", "--arrivals", str(bad), "--policies", "verl-serial"]) == 2
    assert "verl-serial" in capsys.readouterr().err
    assert main(["simulate", "--mix", "M3", "--plot", str(tmp_path / "x.png")]) == 2
    assert "--plot" in capsys.readouterr().err


def test_the_bench_reports_each_load_and_every_target(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    files = run_arrivals_suite(tmp_path, day=SMALL, loads=(0.8, 1.0))
    assert set(files) == {"arrivals-80.png", "arrivals-100.png", "arrivals.json", "arrivals.md"}
    assert all((tmp_path / f).stat().st_size > 0 for f in files)
    report = json.loads((tmp_path / "arrivals.json").read_text())
    assert set(report["loads"]) == {"0.8", "1.0"}
    measured = {t["target"].split(" at ")[0]: t for t in report["targets"]}
    assert set(measured) == {"goodput", "Jain's index", "mean JCT"}
    for t in measured.values():
        assert t["value"] > 0 and isinstance(t["met"], bool)
    summary = (tmp_path / "arrivals.md").read_text()
    assert "## 80% offered load" in summary and "| goodput at 100% load" in summary
