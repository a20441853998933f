"""`jigsaw validate` and `jigsaw simulate`: field-addressed errors, deterministic JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jigsaw_engine.cli import main
from jigsaw_engine.errors import SpecError
from jigsaw_engine.spec.workload_file import parse_workload
from tests.engine.builders import make_spec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mix-small.yaml"


def test_workload_errors_name_the_pipeline_index() -> None:
    raw = {
        "cluster": {"devices_per_node": 4},
        "pipelines": [make_spec(), make_spec(rollout={"n": 0}), make_spec(resources={"num_gpus": 8})],
    }
    with pytest.raises(SpecError) as info:
        parse_workload(raw)
    assert [str(e) for e in info.value.errors] == [
        "pipelines[1].rollout.n: must be >= 1, got 0",
        "pipelines[2].resources.num_gpus: must be <= 4 (the cluster's devices), got 8",
    ]


def test_simulate_json_is_byte_identical_for_the_same_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = []
    for name in ("a", "b", "c"):
        seed = "1" if name == "c" else "0"
        assert (
            main(
                [
                    "simulate",
                    "--workload",
                    str(EXAMPLE),
                    "--steps",
                    "3",
                    "--seed",
                    seed,
                    "--deterministic",
                    "--policies",
                    "verl,areal,muxserve,rollmux",
                    "--json",
                    str(tmp_path / name),
                ]
            )
            == 0
        )
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]
    assert outs[0] != outs[2]  # another seed draws other lengths
    table = capsys.readouterr().out
    assert "(= verl-" in table and "(= areal-" in table
    report = json.loads(outs[0])
    assert set(report["policies"]) == {"verl", "areal", "muxserve", "rollmux"}
    assert "search-llama-8b" in report["policies"]["verl"]["pipelines"]


def test_cli_reports_bad_files_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "job.yaml"
    bad.write_text(yaml.safe_dump(make_spec(rollout={"n": 0})))
    assert main(["validate", str(bad)]) == 2
    assert "rollout.n: must be >= 1, got 0" in capsys.readouterr().err
    assert main(["simulate", "--workload", str(EXAMPLE), "--policies", "jigsaw-x"]) == 2
    assert "--policies: unknown jigsaw-x" in capsys.readouterr().err
    broken = tmp_path / "mix.yaml"
    broken.write_text("cluster: [unclosed")
    assert main(["simulate", "--workload", str(broken)]) == 2
    assert capsys.readouterr().err == (
        f"error: --workload {broken}: not valid YAML: line 1, column 19: expected ',' or ']', but got '<stream end>'\n"
    )


CHECKPOINT_EXAMPLE = EXAMPLE.parent / "real-checkpoint.yaml"
"""Trains a checkpoint a script writes first (torch needed): validated in tests/train/test_checkpoint_jobs.py."""


@pytest.mark.parametrize(
    "example",
    [p for p in sorted(EXAMPLE.parent.glob("*.y*ml")) if p != CHECKPOINT_EXAMPLE],
    ids=lambda p: p.name,
)
def test_every_example_validates(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(example)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{example}: ok (a workload of ") and " pipelines on " in out


def test_validate_lists_every_problem_of_a_workload_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = tmp_path / "mix.yaml"
    pipelines = [
        make_spec(),
        make_spec(rollout={"n": 0}),
        make_spec(model="qwen9"),
        make_spec(resources={"num_gpus": 16}),
    ]
    workload.write_text(yaml.safe_dump({"cluster": {"device_type": "h100"}, "pipelines": pipelines, "gpus": 8}))
    assert main(["validate", str(workload)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == f"error: {workload}: 4 problems"
    assert lines[1:3] == [
        "  gpus: unknown field; known fields: cluster, pipelines",
        "  pipelines[1].rollout.n: must be >= 1, got 0",
    ]
    assert lines[3].startswith("  pipelines[2].model: must be one of ") and "got 'qwen9'" in lines[3]
    assert lines[4] == "  pipelines[3].resources.num_gpus: must be <= 8 (the cluster's devices), got 16"


def test_validate_takes_a_single_pipeline_spec_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(make_spec()))
    assert main(["validate", str(spec)]) == 0
    assert capsys.readouterr().out == f"{spec}: ok (a pipeline spec)\n"
    spec.write_text(json.dumps(make_spec(rollout={"n": 0}, trainer={"total_steps": -1})))
    assert main(["validate", str(spec)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {spec}: 2 problems",
        "  rollout.n: must be >= 1, got 0",
        "  trainer.total_steps: must be >= 1, got -1",
    ]


def test_a_misspelt_workload_is_read_as_a_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = tmp_path / "mix.yaml"
    workload.write_text(yaml.safe_dump({"clustre": {"num_nodes": 1}, "pipelines": [make_spec()]}))
    assert main(["validate", str(workload)]) == 2
    assert "  clustre: unknown field; did you mean 'cluster'?" in capsys.readouterr().err.splitlines()


def test_simulate_draws_a_timeline_per_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "run.png"
    args = ["simulate", "--workload", str(EXAMPLE), "--steps", "2", "--policies", "verl,streamrl"]
    assert main([*args, "--timeline", str(base)]) == 0
    captured = capsys.readouterr()
    for policy in ("verl", "streamrl"):
        png = tmp_path / f"run-{policy}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"timeline: {png}" in captured.out
    assert "4/4 done" in captured.err  # the progress bar: 2 members each for verl and streamrl


def test_bench_writes_a_report_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    policies = "verl,streamrl,areal,rollmux,muxserve,jigsaw,greedy,jigsaw-with-split"
    args = ["bench", "--out", str(out), "--mixes", "M3", "--seeds", "1", "--steps", "2", "--policies", policies]
    assert main([*args, "--random", "1"]) == 0
    summary = (out / "summary.md").read_text()
    results = json.loads((out / "results.json").read_text())
    m3 = results["mixes"]["M3"]["policies"]
    assert set(m3) == set(policies.split(","))
    ratio = results["ratios"]["per_mix"]["M3"]["jigsaw/best baseline"]
    best = max(m3[b]["throughput_tokens_per_s"] for b in ("verl", "streamrl", "areal", "rollmux", "muxserve"))
    assert ratio == pytest.approx(m3["jigsaw"]["throughput_tokens_per_s"] / best)
    # The lower bound caps every policy's gain over verl; the report says by how much.
    bound = results["ratios"]["per_mix"]["M3"]["bound on jigsaw/verl"]
    assert bound == pytest.approx(1 / m3["verl"]["lower_bound_ratio"])
    assert 1.0 < results["ratios"]["per_mix"]["M3"]["jigsaw/verl"] <= bound
    assert "| M3 | 4xa100 |" in summary and "## Ablations" in summary and "random mixes" in summary
    # A mean is shown to four decimals beside its target, so 1.0996 never reads as a met 1.10.
    greedy = results["ratios"]["mean jigsaw/greedy"]
    verdict = "met" if greedy >= 1.1 else "missed"
    assert f"- mean jigsaw/greedy: {greedy:.4f} (target 1.1: {verdict})" in summary
    assert results["random"]["count"] == 1
    for png in ("throughput.png", "ablations.png", "latency_ratio.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert main(["bench", "--out", str(out), "--mixes", "M9"]) == 2
    assert "--mixes: unknown M9" in capsys.readouterr().err


def test_bench_scores_long_response_mixes_against_greedy(tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ["bench", "--out", str(out), "--mixes", "M3", "--seeds", "2", "--steps", "2", "--policies", "greedy,jigsaw"]
    assert main([*args, "--long", "1"]) == 0
    results = json.loads((out / "results.json").read_text())
    m3 = results["mixes"]["M3"]
    by_seed = m3["jigsaw/greedy by seed"]
    assert len(by_seed) == 2 and min(by_seed) > 0
    long = results["long"]
    assert (long["family"], long["count"]) == ("long-response", 1)
    assert long["mixes"][0]["best_baseline"] is None  # no baseline was asked for
    assert long["min jigsaw/greedy"] == long["mixes"][0]["jigsaw/greedy"]
    summary = (out / "summary.md").read_text()
    row = f"| M3 | {by_seed[0]:.3f} | {by_seed[1]:.3f} | {min(by_seed):.3f} |"
    assert "## jigsaw / greedy by seed" in summary and row in summary
    assert "## Long-response mixes" in summary and "`jigsaw bench --long 1`" in summary
