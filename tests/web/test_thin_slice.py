"""One job end to end: REST -> Postgres -> Celery (on commit) -> engine gateway -> engine ->
events -> Postgres -> Channels on Redis -> a subscribed WebSocket client."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from rest_framework.test import APIClient

from tests.engine.builders import make_spec
from webapp.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


async def receive_until_terminal(ws: WebsocketCommunicator, timeout_s: float = 60) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        message = await ws.receive_json_from(timeout=deadline - loop.time())
        assert message["type"] == "event"
        events.append(message["event"])
        if message["event"]["kind"] == "status" and message["event"]["data"]["status"] in (
            "succeeded",
            "failed",
            "cancelled",
        ):
            return events
    raise AssertionError(f"job did not finish in {timeout_s}s; saw {events}")


@pytest.mark.asyncio
async def test_job_streams_status_and_metrics_to_its_tenant_only(
    celery_worker_thread, engine_speed, make_actor
) -> None:
    engine_speed(40.0)  # about 20 s of startup plus 3 short steps: a few wall seconds, watched live
    owner = await sync_to_async(make_actor)("acme")
    other = await sync_to_async(make_actor)("globex")

    response = await sync_to_async(api(owner.token).post)(
        "/api/v1/jobs", {"name": "slice", "spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert response.status_code == 201, response.content
    job_id = response.json()["id"]
    assert response.json()["status"] == "queued"

    ws = WebsocketCommunicator(
        application, f"/ws/jobs/{job_id}/", headers=[(b"authorization", f"Bearer {owner.token}".encode())]
    )
    connected, _ = await ws.connect()
    assert connected
    events = await receive_until_terminal(ws)
    await ws.disconnect()

    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), "events arrive in order, none missing or repeated"
    statuses = [e["data"]["status"] for e in events if e["kind"] == "status"]
    distinct = [s for i, s in enumerate(statuses) if i == 0 or s != statuses[i - 1]]
    assert distinct == ["queued", "starting", "running", "succeeded"]
    kinds = [e["kind"] if e["kind"] != "status" else e["data"]["status"] for e in events]
    first_metrics = kinds.index("metrics")
    assert kinds.index("running") < first_metrics < kinds.index("succeeded")
    metric_steps = [e["data"]["step"] for e in events if e["kind"] == "metrics"]
    assert metric_steps == [1, 2, 3]
    assert events[first_metrics]["data"]["metrics"]["perf/throughput"] > 0

    job = (await sync_to_async(api(owner.token).get)(f"/api/v1/jobs/{job_id}")).json()
    assert job["status"] == "succeeded" and job["progress"] == {"step": 3, "total_steps": 3}

    # Another tenant learns nothing: 404 on the API, 4404 on the stream.
    foreign = await sync_to_async(api(other.token).get)(f"/api/v1/jobs/{job_id}")
    assert foreign.status_code == 404
    assert foreign.json()["error"]["code"] == "not_found"
    listing = (await sync_to_async(api(other.token).get)("/api/v1/jobs")).json()
    assert listing["results"] == []
    ws2 = WebsocketCommunicator(
        application, f"/ws/jobs/{job_id}/", headers=[(b"authorization", f"Bearer {other.token}".encode())]
    )
    await ws2.connect()
    closed = await ws2.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4404}


@pytest.mark.asyncio
async def test_reconnect_with_last_seq_resumes_without_gaps(celery_worker_thread, engine_speed, make_actor) -> None:
    engine_speed(float("inf"))
    owner = await sync_to_async(make_actor)("initech")
    response = await sync_to_async(api(owner.token).post)(
        "/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    job_id = response.json()["id"]
    headers = [(b"authorization", f"Bearer {owner.token}".encode())]
    ws = WebsocketCommunicator(application, f"/ws/jobs/{job_id}/", headers=headers)
    await ws.connect()
    everything = await receive_until_terminal(ws)
    await ws.disconnect()

    cut = len(everything) // 2
    ws = WebsocketCommunicator(application, f"/ws/jobs/{job_id}/?after={everything[cut - 1]['seq']}", headers=headers)
    await ws.connect()
    rest = await receive_until_terminal(ws)
    await ws.disconnect()
    assert rest == everything[cut:]
