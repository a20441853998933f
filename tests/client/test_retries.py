"""Retries never do the work twice: a submit whose answer is lost is sent again with the same
``Idempotency-Key`` (the server replays the first answer), a cancel is not sent again."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from jigsaw_client.client import JigsawClient
from jigsaw_client.errors import ApiError, ConnectionFailed
from tests.engine.builders import make_spec
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


class LoseFirstAnswer(httpx.BaseTransport):
    """Delivers each request to the real server, but drops the connection before the first
    POST's answer comes back, as a proxy restart or a flaky network would."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.posts: list[httpx.Request] = []
        self.answers: list[httpx.Response] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method != "POST":
            return response
        self.posts.append(request)
        response.read()
        response.close()
        if len(self.posts) == 1:
            raise httpx.RemoteProtocolError("server disconnected without sending a response", request=request)
        self.answers.append(response)
        return response

    def close(self) -> None:
        self.inner.close()


def test_a_submit_retried_after_a_dropped_connection_creates_one_job(
    live_server_url: str, actor: Any, engine_speed: Any
) -> None:
    transport = LoseFirstAnswer()
    with JigsawClient(live_server_url, actor.token, transport=transport, backoff_s=0.0) as client:
        job = client.submit_job(make_spec(), name="once")
        other = client.submit_job(make_spec(), name="twice")
        # One job a page: the listing follows the cursor to the second.
        listed = [j["name"] for j in client.list_jobs(page_size=1)]

    first_key, retry_key, other_key = (r.headers["Idempotency-Key"] for r in transport.posts)
    assert first_key == retry_key, "the retry reuses the key"
    assert other_key != first_key, "each new submit gets a fresh key"
    assert transport.answers[0].headers["Idempotent-Replayed"] == "true"
    assert sorted(Job.objects.values_list("name", flat=True)) == ["once", "twice"]
    assert Job.objects.get(name="once").pk.hex == job["id"].replace("-", "")
    assert other["name"] == "twice"
    assert listed == ["twice", "once"]


def _client(handler: Any) -> JigsawClient:
    return JigsawClient("http://jigsaw.test", "t", transport=httpx.MockTransport(handler), backoff_s=0.0)


def test_a_cancel_whose_answer_was_lost_is_not_sent_again() -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        raise httpx.ReadError("connection reset", request=request)

    with _client(handler) as client, pytest.raises(ConnectionFailed) as failed:
        client.cancel_job("6f1c0c1e-0000-4000-8000-000000000000")
    assert sent == ["/api/v1/jobs/6f1c0c1e-0000-4000-8000-000000000000/cancel"]
    assert str(failed.value).startswith("could not reach http://jigsaw.test/api/v1/jobs/6f1c0c1e")


def test_a_request_that_never_left_is_retried_even_when_not_retry_safe() -> None:
    attempts: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        if len(attempts) < 3:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"id": "x", "status": "cancelling"})

    with _client(handler) as client:
        assert client.cancel_job("6f1c0c1e-0000-4000-8000-000000000000")["status"] == "cancelling"
    assert len(attempts) == 3


def test_a_submit_still_in_flight_on_the_server_is_waited_for() -> None:
    answers = iter(
        [
            httpx.Response(409, json={"error": {"code": "idempotency_in_flight", "message": "retry", "details": []}}),
            httpx.Response(201, json={"id": "x", "status": "queued"}),
        ]
    )
    with _client(lambda request: next(answers)) as client:
        assert client.submit_job({"model": "m"})["status"] == "queued"


def test_an_error_that_is_not_in_the_api_shape_still_reads_well() -> None:
    with (
        _client(lambda request: httpx.Response(404, text="<h1>Not Found</h1>")) as client,
        pytest.raises(ApiError) as failed,
    ):
        client.quota()
    assert (failed.value.status, failed.value.code, failed.value.message) == (404, "http_404", "<h1>Not Found</h1>")
