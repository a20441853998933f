"""The ``jigsaw`` console script: ``jobs`` reaches the API client, everything else the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jigsaw_client import entry
from tests.engine.builders import make_spec


def test_engine_commands_still_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(make_spec()))
    assert entry.main(["validate", str(spec)]) == 0
    assert capsys.readouterr().out.strip() == f"{spec}: ok (a pipeline spec)"


def test_jobs_reaches_the_client(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        entry.main(["jobs", "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: jigsaw jobs ")


def test_top_level_help_mentions_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        entry.main(["--help"])
    out = capsys.readouterr().out
    assert "{validate,simulate,arrivals,bench,run}" in out and "jigsaw jobs --help" in out


def test_the_router_loads_neither_side_before_it_must() -> None:
    probe = "import sys, jigsaw_client.entry; print(sorted(m for m in ('httpx', 'jigsaw_engine') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
