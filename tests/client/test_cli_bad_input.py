"""``jigsaw jobs`` on bad local input (a spec file, an argument, the server URL): refused before
any request with a message naming it, exit status 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw_client import entry

NOWHERE = "http://127.0.0.1:9"
"""No server listens here: a case that got as far as a request would fail differently."""

FILES = {
    "list.yaml": b"- just\n- a list\n",
    "broken.yaml": b"name: [unclosed\n",
    "broken.json": b'{"name": ',
    "binary.yaml": b"\x00\x01\xff\xfe",
    "empty.yaml": b"",
}
# (command line, text the message names)
CASES = [
    ("submit {dir}/missing.yaml", "{dir}/missing.yaml: No such file or directory"),
    ("submit {dir}", "{dir}: Is a directory"),
    ("submit {dir}/list.yaml", "{dir}/list.yaml: must hold a mapping (the pipeline spec), got list"),
    ("submit {dir}/broken.yaml", "{dir}/broken.yaml: not valid YAML"),
    ("submit {dir}/broken.json", "{dir}/broken.json: not valid JSON"),
    ("submit {dir}/binary.yaml", "{dir}/binary.yaml: not a text file"),
    ("submit {dir}/empty.yaml", "{dir}/empty.yaml: is empty"),
    ("get not-a-job", "job_id: not a job id (a UUID): 'not-a-job'"),
    ("cancel 12", "job_id: not a job id"),
    ("list --limit -1", "--limit: must be a whole number >= 0, got '-1'"),
    ("list --limit ten", "--limit: must be a whole number >= 0, got 'ten'"),
    ("frob", "invalid choice: 'frob'"),
    ("list --url 127.0.0.1:8000", "--url: server URL must start with http:// or https://"),
    ("list --url http://[::1", "--url: not a valid server URL"),
    ("list --url http://127.0.0.1:99999", "--url: not a valid server URL (Port out of range"),
    ("list --url http://", "--url: server URL has no host"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("specs")
    for name, content in FILES.items():
        (path / name).write_bytes(content)
    return path


@pytest.mark.parametrize(("line", "text"), CASES)
def test_bad_input_is_named_with_exit_status_2(
    line: str, text: str, folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JIGSAW_URL", NOWHERE)
    monkeypatch.setenv("JIGSAW_TOKEN", "jrl_test")
    try:
        code = entry.main(["jobs", *line.format(dir=folder).split(" ")])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert text.format(dir=folder) in err


def test_a_bad_url_from_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JIGSAW_URL", "http://[::1")
    assert entry.main(["jobs", "quota", "--token", "jrl_test"]) == 2
    assert capsys.readouterr().err.startswith("error: JIGSAW_URL: not a valid server URL")
