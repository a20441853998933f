"""Every ``jigsaw`` engine command on bad input: a clear message naming what is wrong, exit
status 2, never a traceback.

Each case is a command line over files written once (``{dir}`` is their folder) and a text the
message must hold: the offending argument, field path or name.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from jigsaw_engine.cli import main
from jigsaw_engine.workload.traces import load_trace_file
from tests.engine.builders import make_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mix-small.yaml"
REAL_EXAMPLE = ROOT / "examples" / "real-cpu.yaml"
CLUSTER = {"num_nodes": 1, "devices_per_node": 8, "device_type": "h100"}
RUN_INSTALLED = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
"""Whether ``jigsaw run``'s training side is installed (not in the engine-only venv)."""

FILES: dict[str, bytes | str | dict[str, object] | list[object]] = {
    "list.yaml": "- a\n- b\n",
    "broken.yaml": "cluster: [unclosed\n",
    "broken.json": '{"cluster": ',
    "binary.yaml": b"\x00\x01\xff\xfe",
    "empty.yaml": "",
    "bad-model.yaml": {"cluster": CLUSTER, "pipelines": [make_spec(model="qwen9-999b")]},
    "negative.yaml": {"cluster": CLUSTER, "pipelines": [make_spec(rollout={"n": -3})]},
    "not-a-number.yaml": {"cluster": CLUSTER, "pipelines": [make_spec(trainer={"total_steps": "many"})]},
    "trace.yaml": {"cluster": CLUSTER, "pipelines": [make_spec(name="replayed", workload="math_trace")]},
    "one-device.yaml": {
        "cluster": {**CLUSTER, "devices_per_node": 1},
        "pipelines": [make_spec(resources={"num_gpus": 1}, trainer={"total_steps": 1})],
    },
    "job.yaml": make_spec(rollout={"n": 0}, model="qwen9-999b"),
}

# (command line, text the message names)
COMMON_FILE_CASES = [
    ("missing.yaml", "No such file or directory"),
    ("list.yaml", "must be a mapping"),
    ("broken.yaml", "not valid YAML: line 2, column 1"),
    ("broken.json", "not valid JSON"),
    ("binary.yaml", "not a text file"),
    ("empty.yaml", "is empty"),
    ("bad-model.yaml", "pipelines[0].model: must be one of"),
    ("negative.yaml", "pipelines[0].rollout.n: must be >= 1, got -3"),
    ("not-a-number.yaml", "pipelines[0].trainer.total_steps: must be an integer, got 'many'"),
]
CASES = [
    *((f"validate {{dir}}/{name}", text) for name, text in COMMON_FILE_CASES),
    ("validate {dir}/job.yaml", "rollout.n: must be >= 1, got 0"),
    ("validate {dir}/job.yaml", "model: must be one of"),
    *((f"simulate --workload {{dir}}/{name} --steps 1", text) for name, text in COMMON_FILE_CASES),
    *((f"simulate --workload {{dir}}/{name}", f"--workload {{dir}}/{name}") for name, _ in COMMON_FILE_CASES),
    ("simulate --workload {dir}/trace.yaml --steps 1", "math_dapo_qwen2.5-32b.json not found in {dir}/no-traces"),
    ("simulate --workload {dir}/trace.yaml --steps 1", "pipeline 'replayed'"),
    ("simulate --workload {dir}/trace.yaml --steps 1", "set JIGSAW_TRACE_DIR"),
    ("simulate --mix M9", "--mix"),
    ("simulate --mix M0 --variant 3xh100", "--variant: unknown variant '3xh100' of M0"),
    (f"simulate --workload {EXAMPLE} --variant areal", "--variant: only with --mix"),
    (f"simulate --workload {EXAMPLE} --policies verl,jigsaw-x", "--policies: unknown jigsaw-x"),
    (f"simulate --workload {EXAMPLE} --steps 0", "--steps: must be >= 1, got 0"),
    (f"simulate --workload {EXAMPLE} --steps many", "--steps"),
    (f"simulate --workload {EXAMPLE} --steps 1 --seed -1", "--seed: must be >= 0, got -1"),
    (f"simulate --workload {EXAMPLE} --seed x", "--seed"),
    (f"simulate --workload {EXAMPLE} --steps 1 --json {{dir}}/nowhere/out.json", "--json {dir}/nowhere/out.json"),
    (f"simulate --workload {EXAMPLE} --steps 1 --timeline {{dir}}", "--timeline {dir}: is a folder"),
    ("simulate --workload {dir}/one-device.yaml --policies rollmux", "--policies: rollmux: no layout fits"),
    ("bench --out {dir}/report --mixes M9", "--mixes: unknown M9"),
    ("bench --out {dir}/report --mixes ''", "--mixes: unknown (none)"),
    ("bench --out {dir}/report --mixes M3 --policies nope", "--policies: unknown nope"),
    ("bench --out {dir}/report --mixes M3 --seeds 0", "--seeds: must be >= 1, got 0"),
    ("bench --out {dir}/report --mixes M3 --seeds -2", "--seeds: must be >= 1, got -2"),
    ("bench --out {dir}/report --mixes M3 --steps x", "--steps"),
    ("bench --out {dir}/report --mixes M3 --seeds 1 --steps 1 --policies verl --random -1", "--random: must be >= 0"),
    ("bench --out {dir}/report --mixes M3 --seeds 1 --steps 1 --policies verl --long -1", "--long: must be >= 0"),
    ("bench --out {dir}/list.yaml --mixes M3 --seeds 1 --steps 1 --policies verl", "--out {dir}/list.yaml: is a file"),
    ("bench --out {dir}/report --mixes MT --seeds 1 --steps 1 --policies verl", "math_dapo_qwen2.5-32b.json not found"),
]
RUN_CASES = [
    *((f"run --workload {{dir}}/{name}", text) for name, text in COMMON_FILE_CASES),
    (f"run --workload {EXAMPLE}", "pipelines[1].model: a real run needs a Hugging Face checkpoint"),
    (f"run --workload {EXAMPLE} --executor threads", "cluster.device_type: the cluster's devices are h100 GPUs"),
    (f"run --workload {REAL_EXAMPLE} --policies verl", "--policies: unknown verl"),
    (f"run --workload {REAL_EXAMPLE} --steps -1", "--steps: must be >= 1, got -1"),
    (f"run --workload {REAL_EXAMPLE} --json {{dir}}/nowhere/out.json", "--json {dir}/nowhere/out.json: no folder"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-input")
    for name, content in FILES.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content)
        else:
            path.write_text(json.dumps(content) if name.endswith(".json") else yaml.safe_dump(content))
    return folder


@pytest.fixture()
def no_traces(files: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The traces are looked for in an empty folder (and none is cached from an earlier test)."""
    monkeypatch.setenv("JIGSAW_TRACE_DIR", str(files / "no-traces"))
    load_trace_file.cache_clear()
    yield
    load_trace_file.cache_clear()


def _argv(line: str, folder: Path) -> list[str]:
    return [part.replace("''", "") for part in line.format(dir=folder).split(" ")]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("line", "text"), CASES)
@pytest.mark.usefixtures("no_traces")
def test_bad_input_is_named_with_exit_status_2(
    line: str, text: str, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(_argv(line, files), capsys)
    assert code == 2, err
    assert "Traceback" not in err
    assert text.format(dir=files) in err


@pytest.mark.parametrize(("line", "text"), RUN_CASES)
def test_jigsaw_run_refuses_bad_input_before_starting(
    line: str, text: str, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run([*_argv(line, files), "--executor", "threads"], capsys)
    assert code == 2, err
    assert "Traceback" not in err
    # Without the training side installed, `run` says what to install instead.
    assert (text.format(dir=files) if RUN_INSTALLED else "jigsaw run needs ") in err


def test_a_missing_trace_stops_the_command_line_with_one_message(files: Path) -> None:
    """The whole process: stderr is the one message (no logged traceback), exit status 2."""
    result = subprocess.run(
        [sys.executable, "-m", "jigsaw_engine.cli", "simulate", "--workload", str(files / "trace.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"JIGSAW_TRACE_DIR": str(files / "no-traces"), "PATH": "/usr/bin:/bin"},
        check=False,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"error: pipeline 'replayed' (workload math_trace): trace math_dapo_qwen2.5-32b.json not found in "
        f"{files / 'no-traces'}; set JIGSAW_TRACE_DIR to the traces folder\n"
    )
