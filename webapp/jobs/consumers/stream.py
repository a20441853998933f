"""What every event stream shares: authentication and the per-user socket limit, the live
buffer and its batching into frames, backpressure (resync from the database) and the flood
guard. ``job`` and ``tenant`` say which events, how to replay them and how frames look."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, cast
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from tenants.models import ApiToken
from tenants.selectors import credential_active
from webapp.api.inputs import unknown_query_param
from webapp.jobs import selectors
from webapp.jobs.realtime import Delivered, Hole, wire_event
from webapp.observability.metrics import WEBSOCKET_CLIENTS, WEBSOCKET_DELIVERY_LAG_SECONDS

logger = logging.getLogger(__name__)
_P = ParamSpec("_P")
_R = TypeVar("_R")

FLUSH_S = 0.1  # live events go out at most this often...
FLUSH_EVENTS = 200  # ...or as soon as this many wait; also the most events in one frame
FRAME_BYTES = 256 * 1024  # a frame holds fewer events when they are this large together
MAX_PENDING = 5000  # live events held for one client before it has to resync from the database
REPLAY_LIMIT = 5000  # stored events a (re)connecting client gets at most; see each stream
PAGE = 500  # stored events read per query
AUDIT_S = 10.0  # how often a stream looks for stored events that never came live
FLOOD_PER_S = 50  # client messages per second tolerated (they are ignored anyway)

CLOSE_BAD_QUERY = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_FLOOD = 4429
CLOSE_SERVER_ERROR = 1011
CHANNEL_LAYER_TIMEOUT_S = 5.0

READ_SCOPES = frozenset({"jobs:read", "admin"})


def in_db_thread(fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """``database_sync_to_async`` with the signature kept (Channels ships no type hints): every
    read a stream makes runs in Channels' database thread."""
    return cast(Callable[_P, Awaitable[_R]], database_sync_to_async(fn))


_credential_active = in_db_thread(credential_active)
_events_in_holes = in_db_thread(selectors.wire_events_in_holes)


# -- helpers ----------------------------------------------------------------------------------
def _observe_delivery_lag(events: Iterable[dict[str, Any]]) -> None:
    """From each event's commit to its frame going out (``created_at`` is taken in the writing
    transaction, a few milliseconds before its commit)."""
    now = time.time()
    for event in events:
        created = event.get("created_at")
        if created:
            WEBSOCKET_DELIVERY_LAG_SECONDS.observe(max(0.0, now - datetime.fromisoformat(created).timestamp()))


async def _wait(event: asyncio.Event, timeout: float) -> bool:
    """Whether ``event`` got set within ``timeout`` seconds."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), max(timeout, 0.0))
    except TimeoutError:
        return False
    return True


class FloodGuard:
    """Counts messages per one-second window."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self.window_start = float("-inf")
        self.count = 0

    def too_many(self, now: float) -> bool:
        if now - self.window_start >= 1.0:
            self.window_start, self.count = now, 0
        self.count += 1
        return self.count > self.per_second


# -- consumers --------------------------------------------------------------------------------
_open_streams: Counter[int] = Counter()
"""Event streams open on this server process, per user (``WS_MAX_SOCKETS_PER_USER``)."""


class BadQuery(Exception):
    """A query parameter a stream does not take or cannot read: closed 4400, naming it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")


class EventStream(AsyncWebsocketConsumer):  # type: ignore[misc]
    """Authentication, the live buffer, batching, backpressure and the flood guard; subclasses
    say which events, how to replay them and how frames look."""

    stream_kind = "events"
    """The ``stream`` label of the open-streams gauge."""

    query_params: tuple[str, ...] | None = ()
    """The query parameters a stream takes; any other closes it (None: any, read leniently)."""

    async def connect(self) -> None:
        self.group: str | None = None
        self.sender: asyncio.Task[None] | None = None
        self.delivered = Delivered()
        self.pending: list[dict[str, Any]] = []
        self.overflowed = False
        self.wake = asyncio.Event()  # live events are waiting
        self.flush_now = asyncio.Event()  # ...enough not to wait for more
        self.flood = FloodGuard(FLOOD_PER_S)
        self.closing = False
        self.counted_user: int | None = None
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._close(CLOSE_UNAUTHENTICATED)
            return
        limit = settings.WS_MAX_SOCKETS_PER_USER
        if limit and _open_streams[user.pk] >= limit:  # one client must not hold the server's sockets
            await self._close(CLOSE_FLOOD)
            return
        _open_streams[user.pk] += 1
        self.counted_user = user.pk
        WEBSOCKET_CLIENTS.labels(self.stream_kind).inc()
        query = {k: v[0] for k, v in parse_qs(self.scope.get("query_string", b"").decode()).items()}
        try:
            unknown = [n for n in query if n not in self.query_params] if self.query_params is not None else []
            if unknown:
                raise BadQuery(unknown[0], unknown_query_param(unknown[0], self.query_params or ()))
            refused = await self.open_stream(user, self.scope.get("api_token"), query)
        except BadQuery as exc:
            await self._close(CLOSE_BAD_QUERY, reason=str(exc))
            return
        if refused:
            await self._close(refused)
            return
        assert self.group is not None
        try:
            # Bounded: a channel-layer connection left stale by a Redis restart can hang here,
            # leaving an open socket that never sends; closed instead, the client reconnects.
            await asyncio.wait_for(self.channel_layer.group_add(self.group, self.channel_name), CHANNEL_LAYER_TIMEOUT_S)
        except TimeoutError:
            logger.warning("live stream %s: joining its channel group timed out; closing", self.group)
            await self._close(CLOSE_SERVER_ERROR)
            return
        self.sender = asyncio.create_task(self._send_loop())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The socket's whole life: its slot is given back here, however it ends (a disconnect,
        or the consumer dying on an error, e.g. the channel layer's Redis gone, where no
        disconnect runs)."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release_slot()

    async def disconnect(self, code: int) -> None:
        await self._stop()

    def _release_slot(self) -> None:
        counted, self.counted_user = getattr(self, "counted_user", None), None
        if counted is not None:
            WEBSOCKET_CLIENTS.labels(self.stream_kind).dec()
            _open_streams[counted] -= 1
            if _open_streams[counted] <= 0:
                del _open_streams[counted]

    async def _stop(self) -> None:
        """No more events for this socket: leave the group, end the sender (unless it is the
        caller). Runs at the disconnect, and at once when the server closes the socket."""
        group, self.group = self.group, None
        if group:
            try:
                await asyncio.wait_for(
                    self.channel_layer.group_discard(group, self.channel_name), CHANNEL_LAYER_TIMEOUT_S
                )
            except Exception:  # e.g. Redis busy or hung: the group entry expires by itself
                logger.warning("could not leave %s; its membership expires by itself", group, exc_info=True)
        sender, self.sender = self.sender, None
        if sender is not None and sender is not asyncio.current_task():
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender

    async def dispatch(self, message: dict[str, Any]) -> None:
        if message["type"] in ("job.events", "job.event"):
            # Channels would first hop to the database thread (closing old connections) for
            # every message; live events touch no database, and there can be many.
            await self.job_events(message)
        else:
            await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Clients only listen: what they send is ignored, unless it is a flood."""
        if not self.closing and self.flood.too_many(asyncio.get_running_loop().time()):
            await self._close(CLOSE_FLOOD)

    async def job_events(self, message: dict[str, Any]) -> None:
        """``job.events``: wire events in the order they were stored (one job's, or one tenant's,
        from one transaction); ``job.event``: one job's stored event (the older message)."""
        if self.overflowed or self.closing:
            return  # overflowed: it committed before it was published, so the catch-up reads it
        if message["type"] == "job.events":
            self.pending.extend(message["events"])
        else:
            self.pending.append(wire_event(message["job_id"], message["event"]))
        if len(self.pending) > MAX_PENDING:
            self.pending.clear()
            self.overflowed = True
        if self.overflowed or len(self.pending) >= FLUSH_EVENTS:
            self.flush_now.set()
        self.wake.set()

    async def _close(self, code: int, reason: str | None = None) -> None:
        self.closing = True
        await self._stop()
        # A close frame's reason holds at most 123 bytes.
        await self.close(code=code, reason=reason and reason.encode()[:123].decode(errors="ignore"))

    async def _send_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            if not await self.replay():
                await self.send_frame([], [])  # tells the client it is live, and from where
            next_audit = loop.time() + AUDIT_S
            while True:
                if loop.time() >= next_audit:  # checked first: a steady live flow must not starve it
                    if not await _credential_active(user=self.scope.get("user"), token=self.scope.get("api_token")):
                        await self._close(CLOSE_UNAUTHENTICATED)  # its token was revoked or expired
                        return
                    await self.audit()
                    next_audit = loop.time() + AUDIT_S
                if not await _wait(self.wake, next_audit - loop.time()):
                    continue
                await _wait(self.flush_now, FLUSH_S)  # let a batch gather
                self.wake.clear()
                self.flush_now.clear()
                if self.overflowed:
                    self.overflowed = False  # live events are kept again from here on
                    await self.send_resync()
                    await self.catch_up()
                    continue
                batch, self.pending = self.pending, []
                await self._send_live(batch)
        except Exception as error:
            if isinstance(error, OSError):  # most likely the client left mid-send (uvicorn's ClientDisconnected)
                logger.info("event stream %s: %r", self.group, error)
            else:
                logger.exception("event stream %s failed; closing so that the client resumes", self.group)
            with contextlib.suppress(Exception):
                await self._close(CLOSE_SERVER_ERROR)

    async def _send_live(self, batch: list[dict[str, Any]]) -> None:
        planned = self.delivered.plan_live(batch)
        holes = [p for p in planned if isinstance(p, Hole)]
        filled = await _events_in_holes(holes=holes, floor=self.delivered.floor) if holes else {}
        events: list[dict[str, Any]] = []
        for item in planned:
            events.extend(filled.get(item, []) if isinstance(item, Hole) else [item])
        _observe_delivery_lag(events)  # before the await: what a client received is counted
        await self.send_events(events)

    async def send_events(self, events: list[dict[str, Any]]) -> None:
        """In frames of at most ``FLUSH_EVENTS`` events and, unless one event is larger,
        ``FRAME_BYTES`` (clients cap frame sizes: 1 MiB by default in Python's websockets)."""
        chunk: list[dict[str, Any]] = []
        encoded: list[str] = []
        size = 0
        for event in events:
            text = json.dumps(event)
            if chunk and (len(chunk) == FLUSH_EVENTS or size + len(text) > FRAME_BYTES):
                await self._send_chunk(chunk, encoded)
                chunk, encoded, size = [], [], 0
            chunk.append(event)
            encoded.append(text)
            size += len(text)
        if chunk:
            await self._send_chunk(chunk, encoded)

    async def _send_chunk(self, chunk: list[dict[str, Any]], encoded: list[str]) -> None:
        for event in chunk:
            self.delivered.record(event)
        await self.send_frame(chunk, encoded)

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content))

    # -- what subclasses decide ---------------------------------------------------------------
    async def open_stream(self, user: Any, token: ApiToken | None, query: dict[str, str]) -> int | None:
        """Check access and set ``group`` and the starting point; a close code to refuse."""
        raise NotImplementedError

    async def replay(self) -> bool:
        """Send stored events the client asked for; whether anything was sent."""
        raise NotImplementedError

    async def catch_up(self) -> None:
        """Send every stored event after what was delivered."""
        raise NotImplementedError

    async def audit(self) -> None:
        raise NotImplementedError

    def cursor(self) -> Any:
        raise NotImplementedError

    async def send_frame(self, events: list[dict[str, Any]], encoded: list[str]) -> None:
        """One frame of ``events`` (``encoded``: each already in JSON, not to encode twice)."""
        cursor = json.dumps(self.cursor())
        await self.send(text_data=f'{{"type": "events", "events": [{", ".join(encoded)}], "cursor": {cursor}}}')

    async def send_resync(self) -> None:
        await self.send_json({"type": "resync", "cursor": self.cursor()})
