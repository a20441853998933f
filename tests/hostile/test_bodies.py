"""Oversized, malformed and pathological request bodies: each is refused with a 4xx in the one
error shape that says what is wrong and where, never a server error, and nothing is stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.utils import override_settings

from tests.engine.builders import make_spec
from tests.hostile.helpers import client_for, error_of, submit
from webapp.datasets.models import Dataset
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db

ROWS = "\n".join(json.dumps({"prompt": f"What is {i}+{i}?", "answer": str(2 * i)}) for i in range(3))


@pytest.fixture(autouse=True)
def datasets_dir(tmp_path: Path) -> Iterator[Path]:
    with override_settings(DATASETS_DIR=str(tmp_path / "datasets")):
        yield tmp_path / "datasets"


@pytest.fixture()
def no_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    from webapp.jobs import task_queue

    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)


def raw_post(client: Any, path: str, body: bytes | str, content_type: str = "application/json", **extra: Any) -> Any:
    return client.generic("POST", path, body, content_type=content_type, **extra)


def test_an_oversized_spec_is_refused_before_parsing_with_the_limit_and_size(make_actor: Any) -> None:
    client = client_for(make_actor("acme").token)
    spec = make_spec()
    spec["padding"] = "x" * (3 * 1024 * 1024)
    r = submit(client, {"spec": spec})
    assert r.status_code == 413
    error = error_of(r)
    assert error["code"] == "request_too_large"
    assert error["message"] == "the request body is too large: at most 1 MiB, got 3 MiB"
    sent = int(r.request["CONTENT_LENGTH"])
    assert error["details"] == [{"field": "<body>", "message": f"must be at most {1024 * 1024} bytes, got {sent}"}]
    assert Job.objects.count() == 0

    with override_settings(API_MAX_BODY_BYTES=2048):
        small = submit(client, {"spec": {**make_spec(), "name": "y" * 3000}})
        assert small.status_code == 413 and "at most 2 KiB, got 3." in error_of(small)["message"]
        unpadded = len(json.dumps({"spec": {**make_spec(), "name": ""}}))
        body = json.dumps({"spec": {**make_spec(), "name": "y" * (2050 - unpadded)}})
        just_over = raw_post(client, "/api/v1/jobs", body, HTTP_IDEMPOTENCY_KEY="k")
        # "at most 2 KiB, got 2 KiB" would say nothing: the bytes then.
        assert error_of(just_over)["message"] == "the request body is too large: at most 2048 bytes, got 2050 bytes"
        # Any API route and method, not only job submission.
        r = client.patch(f"/api/v1/jobs/{'0' * 32}", {"name": "z" * 4000}, format="json")
        assert r.status_code == 413


def test_a_content_length_that_is_not_a_number_is_a_400(make_actor: Any) -> None:
    client = client_for(make_actor("acme").token)
    r = raw_post(client, "/api/v1/jobs", "{}", HTTP_IDEMPOTENCY_KEY="k", CONTENT_LENGTH="12abc")
    assert r.status_code == 400 and error_of(r)["details"][0]["field"] == "Content-Length"


def test_an_oversized_dataset_upload_is_refused_as_json_and_as_multipart(make_actor: Any) -> None:
    client = client_for(make_actor("acme").token)
    with override_settings(DATASET_MAX_BYTES=1024):  # the request may carry 2 KiB + 1 MiB of envelope
        huge = "x" * (3 * 1024 * 1024)
        r = client.post("/api/v1/datasets", {"name": "big", "content": huge}, format="json")
        assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"
        upload = SimpleUploadedFile("big.jsonl", huge.encode())
        r = client.post("/api/v1/datasets", {"file": upload}, format="multipart")
        assert r.status_code == 413
        # Under the envelope but over the dataset limit: the dataset's own, precise refusal.
        r = client.post("/api/v1/datasets", {"name": "big", "content": ROWS * 20}, format="json")
        assert r.status_code == 413 and error_of(r)["details"][0]["field"] == "content"
        assert "at most 1024 bytes" in r.json()["error"]["message"]
    assert not Dataset.objects.exists()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('{"spec": {"name": "x",', "not valid JSON"),
        ("{'spec': {}}", "not valid JSON"),
        ('{"spec": NaN}', "not valid JSON"),
        ('{"spec": {}} trailing', "not valid JSON"),
        ("[" * 10, "not valid JSON"),
        (b"\xff\xfe{}", "not valid utf-8"),
    ],
)
def test_malformed_json_is_a_400_that_says_why(make_actor: Any, body: Any, reason: str) -> None:
    client = client_for(make_actor("acme").token)
    r = raw_post(client, "/api/v1/jobs", body, HTTP_IDEMPOTENCY_KEY="k")
    assert r.status_code == 400
    error = error_of(r)
    assert error["code"] == "parse_error" and reason in error["message"]


def test_an_empty_body_is_a_validation_error_naming_the_missing_field(make_actor: Any) -> None:
    r = raw_post(client_for(make_actor("acme").token), "/api/v1/jobs", "", HTTP_IDEMPOTENCY_KEY="k")
    assert r.status_code == 400 and error_of(r)["details"] == [{"field": "spec", "message": "This field is required."}]


def test_yaml_and_other_media_types_are_refused_with_what_to_send(make_actor: Any) -> None:
    """The API speaks JSON; a YAML spec (or a malformed one) is the client's to convert
    (``jigsaw jobs submit spec.yaml`` does, and reports bad YAML itself)."""
    client = client_for(make_actor("acme").token)
    for content_type, body in [
        ("application/yaml", "spec:\n  name: [unclosed\n"),
        ("application/x-www-form-urlencoded", "spec=1"),
        ("text/plain", "{}"),
    ]:
        r = raw_post(client, "/api/v1/jobs", body, content_type=content_type, HTTP_IDEMPOTENCY_KEY="k")
        assert r.status_code == 415, (content_type, r.content)
        error = error_of(r)
        assert error["code"] == "unsupported_media_type" and content_type in error["message"]
        assert error["details"] == [
            {"field": "Content-Type", "message": "send application/json (dataset uploads also take multipart)"}
        ]


def test_malformed_yaml_spec_file_is_reported_by_the_client_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jigsaw_client import cli

    path = tmp_path / "spec.yaml"
    path.write_text("name: gsm8k\nrollout: {n: 4\n  tabs:\t- [\n")
    assert cli.main(["submit", str(path), "--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: not valid YAML:") and "Traceback" not in err


@pytest.mark.parametrize("depth", [33, 5000, 200_000])
def test_deeply_nested_json_is_refused_whatever_the_depth(make_actor: Any, depth: int) -> None:
    client = client_for(make_actor("acme").token)
    body = '{"spec": ' + "[" * depth + "]" * depth + "}"
    r = raw_post(client, "/api/v1/jobs", body, HTTP_IDEMPOTENCY_KEY="k")
    assert r.status_code == 400, r.content[:300]
    error = error_of(r)
    assert error["code"] == "parse_error" and "at most 32 levels" in error["message"]


def test_nesting_within_the_limit_reaches_validation(make_actor: Any) -> None:
    client = client_for(make_actor("acme").token)
    deep: Any = 1
    for _ in range(30):
        deep = {"a": deep}
    r = submit(client, {"spec": {**make_spec(), "rollout": deep}})
    assert r.status_code == 400 and error_of(r)["code"] == "validation_error"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "a\x00b", "spec": {}}, "name"),
        ({"spec": {"name": "ok", "data": {"train_files": "dataset:x\x00y"}}}, "spec.data.train_files"),
        ({"spec": {"nul\x00key": 1}}, "spec"),
        ({"spec": {"name": "stored in jsonb\x00"}}, "spec.name"),
        ({"spec": {"name": "lone \udc00 surrogate"}}, "spec.name"),
        ({"spec": {"tags": ["fine", "\ud800"]}}, "spec.tags[1]"),
    ],
)
def test_unstorable_characters_are_named_not_a_server_error(make_actor: Any, body: Any, field: str) -> None:
    client = client_for(make_actor("acme").token)
    raw = json.dumps(body)  # escapes NUL and the lone surrogate as \\u0000 and \\ud800
    r = raw_post(client, "/api/v1/jobs", raw, HTTP_IDEMPOTENCY_KEY="k")
    assert r.status_code == 400
    error = error_of(r)
    assert error["details"][0]["field"] == field and "NUL characters or unpaired surrogates" in error["message"]
    assert Job.objects.count() == 0


def test_nul_in_the_url_is_a_400_not_a_database_error(make_actor: Any) -> None:
    client = client_for(make_actor("acme").token)
    for path, field in [
        ("/api/v1/jobs?name=a%00b", "name"),
        ("/api/v1/jobs?tag=%00", "tag"),
        ("/api/v1/datasets/a%00b", "<path>"),
        ("/api/v1/api-keys/%00", "<path>"),
    ]:
        r = client.get(path)
        assert r.status_code == 400, (path, r.status_code)
        assert error_of(r)["details"] == [{"field": field, "message": "must not contain NUL (\\x00) characters"}]


def test_a_body_within_limits_still_works(make_actor: Any, no_admission: None) -> None:
    """The guards refuse only what they should: an ordinary submission and upload pass."""
    client = client_for(make_actor("acme").token)
    assert submit(client, {"name": "plain", "spec": make_spec()}).status_code == 201
    assert client.post("/api/v1/datasets", {"name": "ok", "content": ROWS}, format="json").status_code == 201


def asgi_scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/jobs",
        "raw_path": b"/api/v1/jobs",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }


async def serve(scope: dict[str, Any], chunks: Any) -> tuple[list[dict[str, Any]], int]:
    """(what the app sent, how many body chunks it read) for one request through the ASGI app."""
    from webapp.asgi import application

    read = 0
    done = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read, done
        if done:  # the body is all in: a server then waits for the client to go away
            await asyncio.Event().wait()
        chunk, more = next(chunks, (b"", False))
        read += 1
        done = not more
        return {"type": "http.request", "body": chunk, "more_body": more}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await application(scope, receive, send)
    return sent, read


@pytest.mark.asyncio
async def test_under_asgi_an_oversized_body_is_refused_before_it_is_read() -> None:
    """Django reads a whole body before any middleware: the ASGI cap must act first."""
    endless = iter(lambda: (b"x" * 65536, True), None)
    sent, read = await serve(asgi_scope([(b"content-length", b"%d" % 10**9)]), endless)
    assert read == 0 and sent[0]["status"] == 413
    body = json.loads(sent[1]["body"])
    assert body["error"]["code"] == "request_too_large" and "got 954 MiB" in body["error"]["message"]

    with override_settings(DATASET_MAX_BYTES=1024):  # the largest limit: 2 KiB + 1 MiB of envelope
        sent, read = await serve(asgi_scope([]), iter(lambda: (b"x" * 65536, True), None))  # chunked, endless
    assert sent[0]["status"] == 413 and read == 17  # cut off just past the limit
    assert "got 1.06 MiB" in json.loads(sent[1]["body"])["error"]["message"]


@pytest.mark.asyncio
async def test_under_asgi_a_small_chunked_body_goes_through() -> None:
    sent, read = await serve(asgi_scope([]), iter([(b"{}", False)]))
    assert read >= 1 and sent[0]["status"] in (401, 403)  # reached the API, which wants a token
