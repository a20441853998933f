"""What users see when something is wrong: the server's message and every ``field: message``,
the reason a token was refused, the URL that could not be reached; always a non-zero exit."""

from __future__ import annotations

import functools
import socket
from typing import Any

import pytest

from jigsaw_client import cli
from jigsaw_client.client import JigsawClient
from tests.engine.builders import make_spec
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_invalid_spec_prints_every_field_and_creates_nothing(jigsaw: Any, spec_file: Any) -> None:
    result = jigsaw("jobs", "submit", spec_file(make_spec(rollout={"n": 0}, trainer={"total_steps": 0})))
    assert result.code == 1
    assert result.out == ""
    lines = result.err.splitlines()
    assert lines[0].startswith("error: ") and lines[0].endswith(" (validation_error, HTTP 400)")
    assert "  spec.rollout.n: must be >= 1, got 0" in lines
    assert "  spec.trainer.total_steps: must be >= 1, got 0" in lines
    assert Job.objects.count() == 0


def test_a_bad_token_is_refused_with_the_reason(jigsaw: Any) -> None:
    result = jigsaw("jobs", "list", "--token", "jrl_nope_nope")
    assert result.code == 1
    assert result.err.strip() == "error: invalid, expired or revoked API token (authentication_failed, HTTP 401)"


def test_no_token_says_how_to_give_one(jigsaw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JIGSAW_TOKEN")
    result = jigsaw("jobs", "quota")
    assert result.code == 1
    assert "HTTP 401" in result.err and "pass --token or set JIGSAW_TOKEN" in result.err


def test_a_spec_file_that_is_not_a_mapping_is_refused_before_any_request(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("- just\n- a list\n")
    assert cli.main(["submit", str(path), "--url", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {path}: must hold a mapping (the pipeline spec), got list"


def test_an_unreachable_server_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(cli, "JigsawClient", functools.partial(JigsawClient, backoff_s=0.0))
    code = cli.main(["quota", "--url", f"http://127.0.0.1:{port}", "--token", "t"])
    assert code == 1
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith(f"error: could not reach http://127.0.0.1:{port}/api/v1/quota: ConnectError")
    )


def test_a_url_without_a_scheme_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "--url", "127.0.0.1:8000"]) == 2
    assert "must start with http:// or https://" in capsys.readouterr().err
