"""WebSocket abuse beyond tests/web/test_websockets.py (which covers a bad Origin, foreign job
ids and a text flood closing 4429): look-alike Origins on a session, a binary flood, and that a
flooding client is closed without costing other clients on the same tenant and job anything."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from tests.engine.builders import make_spec
from webapp.asgi import application
from webapp.jobs import task_queue
from webapp.jobs.services import lifecycle, submit

pytestmark = pytest.mark.django_db(transaction=True)  # consumers read the database from their own threads


@pytest.fixture(autouse=True)
def no_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


@sync_to_async
def session_cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode())


async def opened(path: str, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    ws = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await ws.connect(timeout=5)
    assert connected, code
    first = await ws.receive_json_from(timeout=5)
    assert first["type"] == "events", first
    return ws


async def next_events(ws: WebsocketCommunicator) -> list[dict[str, Any]]:
    while True:
        frame = await ws.receive_json_from(timeout=5)
        if frame["type"] == "events" and frame["events"]:
            return list(frame["events"])


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "origin",
    [
        b"null",
        b"",
        b"http://testserver.evil.example",
        b"http://evil.example",
        b"http://evil.example/http://testserver",
        b"http://testserver@evil.example",
        b"file://",
    ],
)
async def test_a_session_from_a_look_alike_origin_is_refused(make_actor: Any, origin: bytes) -> None:
    actor = await sync_to_async(make_actor)("acme")
    cookie = await session_cookie(actor.user)
    ws = WebsocketCommunicator(application, "/ws/v1/tenant", headers=[(b"origin", origin), cookie])
    connected, _ = await ws.connect(timeout=5)
    assert not connected, origin
    # The same session from the site itself is let in: only the Origin made the difference.
    ok = await opened("/ws/v1/tenant", [(b"origin", b"http://testserver"), cookie])
    await ok.disconnect()


@pytest.mark.asyncio
async def test_a_flooding_client_is_closed_and_its_neighbours_keep_streaming(make_actor: Any) -> None:
    actor = await sync_to_async(make_actor)("acme")
    job = await sync_to_async(
        lambda: str(submit.job_submit(tenant=actor.tenant, user=actor.user, name="f", spec=make_spec()).pk)
    )()
    flooder = await opened(f"/ws/v1/jobs/{job}", bearer(actor.token))
    neighbour = await opened(f"/ws/v1/jobs/{job}", bearer(actor.token))
    tenant_view = await opened("/ws/v1/tenant", bearer(actor.token))

    for _ in range(200):
        await flooder.send_to(bytes_data=b"\x00" * 1024)
    assert await flooder.receive_output(timeout=3) == {"type": "websocket.close", "code": 4429}

    await sync_to_async(lifecycle.job_transition)(job_id=job, to="cancelled", reason="after the flood")
    for ws in (neighbour, tenant_view):
        events = await next_events(ws)
        assert [(e["job_id"], e["data"].get("status")) for e in events] == [(job, "cancelled")]
        await ws.disconnect()
    await flooder.disconnect()
