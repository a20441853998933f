"""The WebSocket API v1 (webapp/jobs/consumers/) against the real ASGI app, Postgres and the
Redis channel layer: tenant isolation, resume by cursor, batching, gap filling, backpressure,
refusals. Events are written with the job services, or straight into the database when a test
needs one that was never published."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing.websocket import WebsocketCommunicator
from django.conf import settings
from django.db import transaction
from django.test import Client

from tests.engine.builders import make_spec
from webapp.asgi import application
from webapp.jobs import consumers, journal, task_queue
from webapp.jobs.consumers import stream
from webapp.jobs.models import Job, JobEvent
from webapp.jobs.realtime import Delivered, Hole, job_group, tenant_group
from webapp.jobs.services import lifecycle
from webapp.jobs.services.submit import job_submit

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://testserver")


@pytest.fixture(autouse=True)
def no_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs stay queued: these tests write every event themselves (and need no Celery)."""
    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


async def open_stream(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[WebsocketCommunicator, dict[str, Any]]:
    """A connected v1 socket and its first frame (the replay, or an empty one once live)."""
    ws = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await ws.connect(timeout=5)
    assert connected, code
    return ws, await ws.receive_json_from(timeout=5)


async def close_code(path: str, headers: list[tuple[bytes, bytes]]) -> int:
    ws = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await ws.connect(timeout=5)
    if connected:
        message = await ws.receive_output(timeout=5)
        assert message["type"] == "websocket.close", message
        code = message["code"]
    await ws.disconnect()
    return int(code)


async def collect(ws: WebsocketCommunicator, n: int, timeout: float = 5) -> tuple[list[dict[str, Any]], list[Any]]:
    """(the next ``n`` events, every frame that brought them)."""
    events: list[dict[str, Any]] = []
    frames: list[Any] = []
    while len(events) < n:
        frame = await ws.receive_json_from(timeout=timeout)
        frames.append(frame)
        if frame["type"] == "events":
            events.extend(frame["events"])
        elif frame["type"] == "event":
            events.append(frame["event"])
    assert len(events) == n, events
    return events, frames


def keys(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(e["job_id"], e["seq"]) for e in events]


@sync_to_async
def submit(actor: Any) -> str:
    return str(job_submit(tenant=actor.tenant, user=actor.user, name="ws", spec=make_spec()).pk)


@sync_to_async
def log_lines(job_id: str, n: int) -> None:
    """``n`` log events in one transaction: published together when it commits."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        for i in range(n):
            journal.append_event(job, "log", {"level": "info", "message": f"line {i}"})


@sync_to_async
def unpublished_event(job_id: str) -> tuple[int, dict[str, Any]]:
    """(tenant id, event) of an event stored but never sent on the channel layer, as if the
    layer had dropped it."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        job.last_event_seq += 1
        job.save(update_fields=["last_event_seq"])
        event = JobEvent.objects.create(job=job, seq=job.last_event_seq, kind="log", data={"message": "quiet"})
    return job.tenant_id, journal.event_payload(event)


async def publish(job_id: str, tenant_id: int, event: dict[str, Any]) -> None:
    """What ``realtime.publish_job_event_on_commit`` sends."""
    layer = get_channel_layer()
    message = {"type": "job.event", "job_id": job_id, "event": event}
    await layer.group_send(job_group(job_id), message)
    await layer.group_send(tenant_group(tenant_id), message)


@sync_to_async
def session_cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode())


# -- tenant stream ----------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_tenant_stream_carries_every_event_of_its_own_jobs_only(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    globex = await sync_to_async(make_actor)("globex")
    ws_a, hello = await open_stream("/ws/v1/tenant", bearer(acme.token))
    assert hello["type"] == "events" and hello["events"] == [] and isinstance(hello["cursor"], str)
    ws_b, _ = await open_stream("/ws/v1/tenant/", bearer(globex.token))

    first, second = await submit(acme), await submit(acme)
    await sync_to_async(lifecycle.job_transition)(job_id=first, to="cancelled", reason="test")
    theirs = await submit(globex)

    events, _ = await collect(ws_a, 3)
    assert keys(events) == [(first, 1), (second, 1), (first, 2)]
    assert [e["kind"] for e in events] == ["status"] * 3
    assert events[2]["data"]["status"] == "cancelled"
    assert keys((await collect(ws_b, 1))[0]) == [(theirs, 1)]
    assert await ws_a.receive_nothing(timeout=0.3)
    assert await ws_b.receive_nothing(timeout=0.1)
    await ws_a.disconnect()
    await ws_b.disconnect()


@pytest.mark.asyncio
async def test_resume_with_cursor_replays_exactly_what_was_missed(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    ws, _ = await open_stream("/ws/v1/tenant", bearer(acme.token))
    seen = await submit(acme)
    await log_lines(seen, 2)
    _, frames = await collect(ws, 3)
    cursor = frames[-1]["cursor"]
    await ws.disconnect()

    await log_lines(seen, 1)
    missed = await submit(acme)
    await log_lines(missed, 1)

    ws, replay = await open_stream(f"/ws/v1/tenant?after={cursor}", bearer(acme.token))
    assert keys(replay["events"]) == [(seen, 4), (missed, 1), (missed, 2)]
    await log_lines(seen, 1)
    assert keys((await collect(ws, 1))[0]) == [(seen, 5)]
    assert await ws.receive_nothing(timeout=0.2)
    await ws.disconnect()


@pytest.mark.asyncio
async def test_audit_sends_what_never_came_live_and_shrinks_the_cursor(
    make_actor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "AUDIT_S", 0.2)
    acme = await sync_to_async(make_actor)("acme")
    ws, hello = await open_stream("/ws/v1/tenant", bearer(acme.token))
    job = await submit(acme)
    await collect(ws, 1)
    _, lost = await unpublished_event(job)  # the channel layer "dropped" it, and nothing follows
    events, _ = await collect(ws, 1, timeout=3)
    assert events == [{"job_id": job, **lost}]

    await asyncio.sleep(0.8)  # a few audits: the floor passes every event sent so far
    other = await submit(acme)
    events, frames = await collect(ws, 1)
    assert keys(events) == [(other, 1)]
    cursor = frames[-1]["cursor"]
    assert int(cursor.split(".")[0]) > int(hello["cursor"]) and job.replace("-", "") not in cursor
    await ws.disconnect()

    await log_lines(job, 1)
    ws, replay = await open_stream(f"/ws/v1/tenant?after={cursor}", bearer(acme.token))
    assert keys(replay["events"]) == [(job, 3)]
    await ws.disconnect()


@pytest.mark.asyncio
async def test_tenant_stream_refusals(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    globex = await sync_to_async(make_actor)("globex")
    writer = await sync_to_async(make_actor)("initech", scopes=("jobs:write",))
    cookie = await session_cookie(acme.user)

    assert await close_code("/ws/v1/tenant", [ORIGIN]) == 4401
    assert await close_code("/ws/v1/tenant", bearer("jrl_nope_nope")) == 4401
    assert await close_code("/ws/v1/tenant", bearer(writer.token)) == 4403
    assert await close_code("/ws/v1/tenant?tenant=globex", bearer(acme.token)) == 4403
    assert await close_code("/ws/v1/tenant?tenant=globex", [ORIGIN, cookie]) == 4403
    assert await close_code("/ws/v1/tenant?after=not-a-cursor", bearer(acme.token)) == 4400
    refused, _ = await WebsocketCommunicator(
        application, "/ws/v1/tenant", headers=[(b"origin", b"http://evil.example"), cookie]
    ).connect(timeout=5)
    assert not refused

    # A session picks its tenant among its memberships, by default the first.
    for path in ("/ws/v1/tenant?tenant=acme", "/ws/v1/tenant"):
        ws, _ = await open_stream(path, [ORIGIN, cookie])
        job = await submit(acme)
        await submit(globex)
        assert keys((await collect(ws, 1))[0]) == [(job, 1)]
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()


# -- job stream -------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_job_stream_replays_after_seq_then_batches_live_events(
    make_actor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "FLUSH_S", 0.3)  # publishing 50 events can take a second on a busy machine
    acme = await sync_to_async(make_actor)("acme")
    job = await submit(acme)
    await log_lines(job, 3)
    ws, replay = await open_stream(f"/ws/v1/jobs/{job}?after=2", bearer(acme.token))
    assert keys(replay["events"]) == [(job, 3), (job, 4)] and replay["cursor"] == 4

    await log_lines(job, 50)
    events, frames = await collect(ws, 50)
    assert [e["seq"] for e in events] == list(range(5, 55))
    assert len(frames) <= 10, [len(f["events"]) for f in frames]
    assert frames[-1]["cursor"] == 54
    await ws.disconnect()


@pytest.mark.asyncio
async def test_large_events_split_frames_by_size(make_actor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "FRAME_BYTES", 2500)
    acme = await sync_to_async(make_actor)("acme")
    job = await submit(acme)
    ws, _ = await open_stream(f"/ws/v1/jobs/{job}?after=1", bearer(acme.token))

    @sync_to_async
    def big_logs() -> None:
        with transaction.atomic():
            locked = Job.objects.select_for_update().get(pk=job)
            for _ in range(6):
                journal.append_event(locked, "log", {"message": "x" * 1000})

    await big_logs()
    events, frames = await collect(ws, 6)
    assert [e["seq"] for e in events] == list(range(2, 8))
    assert max(len(f["events"]) for f in frames) == 2, "about 1 kB each: two fit in 2.5 kB"
    await ws.disconnect()


@pytest.mark.asyncio
async def test_job_stream_refusals(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    globex = await sync_to_async(make_actor)("globex")
    job = await submit(acme)
    for path in (f"/ws/v1/jobs/{job}", f"/ws/v1/jobs/{job}/", f"/ws/jobs/{job}/"):
        assert await close_code(path, bearer(globex.token)) == 4404
        assert await close_code(path, [ORIGIN]) == 4401
    assert await close_code(f"/ws/v1/jobs/{'-' * 32}", bearer(acme.token)) == 4404
    assert await close_code(f"/ws/v1/jobs/{job}?after=x", bearer(acme.token)) == 4400
    refused, _ = await WebsocketCommunicator(
        application, f"/ws/v1/jobs/{job}", headers=[(b"origin", b"http://evil.example"), *bearer(acme.token)]
    ).connect(timeout=5)
    assert not refused


async def close_of(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, str]:
    """(the close code, its reason) of a socket refused after it was accepted."""
    ws = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await ws.connect(timeout=5)
    assert connected
    message = await ws.receive_output(timeout=5)
    await ws.disconnect()
    assert message["type"] == "websocket.close", message
    return int(message["code"]), str(message.get("reason", ""))


@pytest.mark.asyncio
async def test_a_bad_query_parameter_closes_4400_naming_it(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    job = await submit(acme)
    for query, reason in [
        ("after=-5", "after: must be an integer >= 0, got '-5'"),
        ("after=x", "after: must be an integer >= 0, got 'x'"),
        ("replay=status,lgo", "replay: must be event kinds among status, metrics, log, samples; got 'lgo'"),
        ("aftr=3", "aftr: unknown query parameter; did you mean 'after'?"),
    ]:
        assert await close_of(f"/ws/v1/jobs/{job}?{query}", bearer(acme.token)) == (4400, reason), query
    for query, reason in [
        ("after=not-a-cursor", "after: is not a cursor this stream gave out"),
        ("tenant=acme&cursor=x", "cursor: unknown query parameter; known query parameters: after, tenant"),
    ]:
        assert await close_of(f"/ws/v1/tenant?{query}", bearer(acme.token)) == (4400, reason), query
    # The dashboard's legacy path stays lenient: a bad seq replays from the start.
    ws = WebsocketCommunicator(application, f"/ws/jobs/{job}/?after=-5", headers=bearer(acme.token))
    assert (await ws.connect(timeout=5))[0]
    await log_lines(job, 1)
    assert [e["seq"] for e in (await collect(ws, 2))[0]] == [1, 2]
    await ws.disconnect()


@pytest.mark.asyncio
async def test_legacy_path_keeps_one_frame_per_event(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    job = await submit(acme)
    ws = WebsocketCommunicator(application, f"/ws/jobs/{job}/?after=0", headers=bearer(acme.token))
    assert (await ws.connect(timeout=5))[0]
    await log_lines(job, 5)
    events, frames = await collect(ws, 6)
    assert [f["type"] for f in frames] == ["event"] * 6
    assert [e["seq"] for e in events] == list(range(1, 7)) and "job_id" not in events[0]
    await ws.disconnect()


# -- lost messages, slow clients, noisy clients -------------------------------------------------
@pytest.mark.asyncio
async def test_a_seq_gap_is_filled_from_the_database(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    job = await submit(acme)
    ws_job, _ = await open_stream(f"/ws/v1/jobs/{job}", bearer(acme.token))
    ws_tenant, _ = await open_stream("/ws/v1/tenant", bearer(acme.token))

    _, lost = await unpublished_event(job)  # seq 2: dropped by the channel layer
    tenant_id, arrives = await unpublished_event(job)  # seq 3: comes live
    await publish(job, tenant_id, arrives)
    for ws in (ws_job, ws_tenant):
        events, _ = await collect(ws, 2)
        assert events == [{"job_id": job, **lost}, {"job_id": job, **arrives}]
        await publish(job, tenant_id, arrives)  # a duplicate is dropped
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()


@pytest.mark.asyncio
async def test_a_client_too_slow_for_the_buffer_resyncs_from_the_database(
    make_actor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "MAX_PENDING", 10)
    monkeypatch.setattr(stream, "FLUSH_S", 1.0)  # live events pile up meanwhile
    acme = await sync_to_async(make_actor)("acme")
    job = await submit(acme)
    ws_job, _ = await open_stream(f"/ws/v1/jobs/{job}?after=1", bearer(acme.token))
    ws_tenant, _ = await open_stream("/ws/v1/tenant", bearer(acme.token))
    legacy = WebsocketCommunicator(application, f"/ws/jobs/{job}/?after=1", headers=bearer(acme.token))
    assert (await legacy.connect(timeout=5))[0]

    await log_lines(job, 40)
    for ws in (ws_job, ws_tenant, legacy):
        events, frames = await collect(ws, 40)
        assert [e["seq"] for e in events] == list(range(2, 42)), "each event once, in order"
        if ws is not legacy:
            assert frames[0]["type"] == "resync"
        while not await ws.receive_nothing(timeout=0.2):  # buffer overflowed again meanwhile: fine
            assert (await ws.receive_json_from())["type"] == "resync"
        await ws.disconnect()


@pytest.mark.asyncio
async def test_a_flood_of_client_messages_closes_4429(make_actor: Any) -> None:
    acme = await sync_to_async(make_actor)("acme")
    ws, _ = await open_stream("/ws/v1/tenant", bearer(acme.token))
    for i in range(10):
        await ws.send_to(text_data=f"not even json {i}")
    assert await ws.receive_nothing(timeout=0.1), "a few messages are ignored"
    for _ in range(60):
        await ws.send_to(text_data="{}")
    assert await ws.receive_output(timeout=2) == {"type": "websocket.close", "code": 4429}
    await ws.disconnect()


@pytest.mark.asyncio
async def test_a_user_holding_the_socket_limit_gets_4429_until_one_closes(make_actor: Any, settings: Any) -> None:
    settings.WS_MAX_SOCKETS_PER_USER = 2
    acme = await sync_to_async(make_actor)("acme")
    globex = await sync_to_async(make_actor)("globex")
    job = await submit(acme)
    first, _ = await open_stream("/ws/v1/tenant", bearer(acme.token))
    second, _ = await open_stream(f"/ws/v1/jobs/{job}", bearer(acme.token))
    assert await close_code("/ws/v1/tenant", bearer(acme.token)) == 4429
    other, _ = await open_stream("/ws/v1/tenant", bearer(globex.token))  # another user is not affected
    await first.disconnect()
    third, _ = await open_stream("/ws/v1/tenant", bearer(acme.token))  # a slot was freed
    for ws in (second, other, third):
        await ws.disconnect()
    # Every socket that closed gave its slot back (other tests' sockets may still be counted).
    assert acme.user.pk not in stream._open_streams and globex.user.pk not in stream._open_streams


@pytest.mark.asyncio
async def test_a_socket_whose_consumer_dies_on_an_error_gives_its_slot_back(
    make_actor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = await sync_to_async(make_actor)("acme")

    async def broken(*args: Any) -> None:
        raise ConnectionError("the channel layer's Redis went away")

    monkeypatch.setattr(consumers.TenantStreamConsumer, "open_stream", broken)
    ws = WebsocketCommunicator(application, "/ws/v1/tenant", headers=bearer(acme.token))
    with pytest.raises(ConnectionError):
        await ws.connect(timeout=5)
        await ws.receive_output(timeout=5)
    assert acme.user.pk not in stream._open_streams


@pytest.mark.asyncio
async def test_a_socket_whose_channel_group_never_answers_closes_so_the_client_reconnects(
    make_actor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A channel-layer connection left stale by a Redis restart can hang instead of failing: the
    # socket must not stay open and silent.
    acme = await sync_to_async(make_actor)("acme")

    async def hang(*args: Any) -> None:
        await asyncio.sleep(3600)

    monkeypatch.setattr(get_channel_layer(), "group_add", hang)
    monkeypatch.setattr(stream, "CHANNEL_LAYER_TIMEOUT_S", 0.2)
    assert await close_code("/ws/v1/tenant", bearer(acme.token)) == stream.CLOSE_SERVER_ERROR
    assert acme.user.pk not in stream._open_streams


# -- the bookkeeping alone --------------------------------------------------------------------
def test_live_events_are_planned_around_duplicates_and_gaps() -> None:
    a, b = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"
    sent = Delivered(seqs={a: 3}, floor=100)
    batch = [{"job_id": a, "seq": s} for s in (2, 3, 4, 6, 6, 7)] + [{"job_id": b, "seq": 5}]
    assert sent.plan_live(batch) == [
        {"job_id": a, "seq": 4},
        Hole(a, 4, 6),
        {"job_id": a, "seq": 6},
        {"job_id": a, "seq": 7},
        Hole(b, None, 5),  # nothing of b sent yet: whatever is stored above the floor
        {"job_id": b, "seq": 5},
    ]
    assert sent.seqs == {a: 3}, "planning sends nothing"


def test_the_tenant_cursor_round_trips_and_refuses_anything_else() -> None:
    sent = Delivered(seqs={"0f6c1e4e-8a8e-4c55-9a39-3b1cfa0b8d1e": 7}, floor=42)
    assert sent.encode() == "42.0f6c1e4e8a8e4c559a393b1cfa0b8d1e-7"
    assert Delivered.decode(sent.encode()) == sent
    assert Delivered.decode("42") == Delivered(floor=42)
    for bad in (
        "",
        "x",
        "-1",
        "42.",
        "42.abc-1",
        "42.0f6c1e4e8a8e4c559a393b1cfa0b8d1e-",
        "1" + f".{'0' * 32}-1" * 2001,
    ):
        with pytest.raises(ValueError):
            Delivered.decode(bad)


@pytest.mark.asyncio
async def test_replay_of_chosen_kinds_skips_the_rest_but_live_sends_all(make_actor) -> None:
    """The job page takes metric history downsampled over REST: its socket replays only status
    and log events, then sends everything live."""
    actor = await sync_to_async(make_actor)("acme")

    def setup() -> str:
        job = job_submit(tenant=actor.tenant, user=actor.user, name="r", spec=make_spec())
        for step in (1, 2, 3):
            journal.append_event(job, "metrics", {"step": step, "total_steps": 3, "metrics": {"x": 1.0}})
        journal.append_event(job, "log", {"level": "info", "message": "hello"})
        return str(job.pk)

    job_id = await sync_to_async(setup)()
    ws = WebsocketCommunicator(
        application,
        f"/ws/v1/jobs/{job_id}?replay=status,log",
        headers=[(b"authorization", f"Bearer {actor.token}".encode())],
    )
    assert (await ws.connect(timeout=5))[0]
    replayed = []
    while len(replayed) < 2:
        frame = await ws.receive_json_from(timeout=5)
        replayed += frame.get("events", [])
    assert [e["kind"] for e in replayed] == ["status", "log"]
    assert frame["cursor"] == 5  # the skipped metrics count as delivered

    def live() -> None:
        job = Job.objects.get(pk=job_id)
        journal.append_event(job, "metrics", {"step": 4, "total_steps": 4, "metrics": {"x": 2.0}})

    await sync_to_async(live)()
    frame = await ws.receive_json_from(timeout=5)
    assert [(e["kind"], e["seq"]) for e in frame["events"]] == [("metrics", 6)]
    await ws.disconnect()


@pytest.mark.asyncio
async def test_a_socket_closes_once_its_token_is_revoked(make_actor, monkeypatch) -> None:
    from django.utils import timezone

    from tenants.models import ApiToken

    monkeypatch.setattr(stream, "AUDIT_S", 0.3)  # the periodic check, sped up
    actor = await sync_to_async(make_actor)("acme")
    job_id = await sync_to_async(
        lambda: str(job_submit(tenant=actor.tenant, user=actor.user, name="r", spec=make_spec()).pk)
    )()
    ws = WebsocketCommunicator(
        application, f"/ws/v1/jobs/{job_id}", headers=[(b"authorization", f"Bearer {actor.token}".encode())]
    )
    assert (await ws.connect(timeout=5))[0]
    await ws.receive_json_from(timeout=5)  # the replay
    await sync_to_async(lambda: ApiToken.objects.filter(tenant=actor.tenant).update(revoked_at=timezone.now()))()
    message = await ws.receive_output(timeout=5)
    assert message["type"] == "websocket.close" and message["code"] == 4401
