"""The ``jigsaw jobs`` CLI run in this process against a live server (uvicorn, Celery worker
and beat, the in-process engine), with its own tenant and API token."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jigsaw_client import entry


@dataclass
class CliResult:
    code: int
    out: str
    err: str


RunCli = Callable[..., CliResult]


@pytest.fixture()
def actor(make_actor: Any) -> Any:
    return make_actor("acme")


@pytest.fixture()
def jigsaw(
    live_server_url: str,
    actor: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> RunCli:
    """``jigsaw("jobs", "list", ...)``: the console script, configured the way users do it
    (``JIGSAW_URL``, ``JIGSAW_TOKEN``); its exit code and output."""
    monkeypatch.setenv("JIGSAW_URL", live_server_url)
    monkeypatch.setenv("JIGSAW_TOKEN", actor.token)

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        code = entry.main(list(argv))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture()
def spec_file(tmp_path: Path) -> Callable[[dict[str, Any]], str]:
    def write(spec: dict[str, Any], suffix: str = ".yaml") -> str:
        path = tmp_path / f"spec{suffix}"
        path.write_text(json.dumps(spec) if suffix == ".json" else yaml.safe_dump(spec))
        return str(path)

    return write
