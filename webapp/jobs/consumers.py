"""WebSocket streams of job events (see ``routing.py`` for the paths).

``/ws/v1/jobs/<id>``  one job's events; resume with ``?after=<seq>``.
``/ws/v1/tenant``     every event of every job of one tenant (the token's, or for a session
                      ``?tenant=<slug>``, default the user's first); resume with ``?after=<cursor>``.
``/ws/jobs/<id>/``    legacy path of the dashboard: as ``/ws/v1/jobs/<id>``, but one
                      ``{"type": "event", "event": ...}`` frame per event.

v1 frames: ``{"type": "events", "events": [...], "cursor": ...}`` (each event with its
``job_id``; the first frame may have none), ``{"type": "resync", "cursor": ...}`` and, tenant
stream only, ``{"type": "reset", "cursor": ...}``. Close codes: 4400 a query parameter it does
not take or cannot read (the close reason names it), 4401
not authenticated, 4403 not allowed on this tenant, 4404 no such job for this caller, 4429 the
client sent too much or its user already holds ``WS_MAX_SOCKETS_PER_USER`` streams on this
server process, 1011 server error (reconnect with the last cursor).

Each event reaches a client once, and a job's events in seq order:
- a stream joins its channel-layer group *before* reading stored events, so nothing falls in
  between; a live event already sent is recognised by its (job, seq) and dropped;
- the channel layer drops messages when a channel is full: a seq gap in a job's live events is
  filled from the database, and a periodic audit sends stored events that no live message
  announced (a lost last event has no successor to reveal its gap);
- live events wait in a bounded buffer and leave in batches; a client that reads too slowly
  for it loses the buffer, gets ``resync`` and the same events from the database instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ParamSpec, TypeVar, cast
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Q

from tenants.models import ApiToken, Membership
from tenants.selectors import tenant_for_user
from webapp.api_inputs import unknown_query_param
from webapp.jobs.journal import event_payload
from webapp.jobs.models import EventKind, Job, JobEvent
from webapp.jobs.realtime import Delivered, Hole, job_group, tenant_group, wire_event

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


# -- database reads (each in Channels' database thread) ---------------------------------------
def _in_db_thread(fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """``database_sync_to_async`` with the signature kept (Channels ships no type hints)."""
    return cast(Callable[_P, Awaitable[_R]], database_sync_to_async(fn))


def _wire(events: Iterable[JobEvent]) -> list[dict[str, Any]]:
    return [wire_event(str(e.job_id), event_payload(e)) for e in events]


@_in_db_thread
def _authorized_job(user: Any, token: ApiToken | None, job_id: str) -> Job | None:
    if token is not None and not READ_SCOPES & set(token.scopes):
        return None
    if token is not None:
        allowed = Job.objects.filter(tenant=token.tenant)
    else:
        allowed = Job.objects.filter(tenant_id__in=Membership.objects.filter(user=user).values("tenant_id"))
    try:
        job: Job | None = allowed.filter(pk=job_id).first()
    except (ValueError, TypeError, ValidationError):  # not a UUID: same answer as a foreign id
        return None
    return job


@_in_db_thread
def _authorized_tenant(user: Any, token: ApiToken | None, slug: str | None) -> int | None:
    """The id of the tenant this caller may read, or None."""
    if token is not None:
        ok = bool(READ_SCOPES & set(token.scopes)) and slug in (None, token.tenant.slug)
        return token.tenant_id if ok else None
    found = tenant_for_user(user=user, slug=slug)
    return found[0].pk if found else None


@_in_db_thread
def _still_allowed(user: Any, token: ApiToken | None) -> bool:
    """An open socket keeps its right to listen only while its token (or user) stays valid."""
    if token is not None:
        current = ApiToken.objects.filter(pk=token.pk).select_related("user").first()
        return current is not None and current.is_active() and current.user.is_active
    return bool(user is not None and get_user_model().objects.filter(pk=user.pk, is_active=True).exists())


@_in_db_thread
def _job_replay_start(job_id: str, after: int) -> int:
    """Past ``REPLAY_LIMIT`` stored events, a job stream starts at the newest ones, so it stays
    continuous from where it starts up to the live events."""
    last = Job.objects.filter(pk=job_id).values_list("last_event_seq", flat=True).first() or 0
    return max(after, last - REPLAY_LIMIT)


@_in_db_thread
def _job_events_after(job_id: str, after: int) -> list[dict[str, Any]]:
    return _wire(JobEvent.objects.filter(job_id=job_id, seq__gt=after).order_by("seq")[:PAGE])


@_in_db_thread
def _latest_event_id() -> int:
    return JobEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


@_in_db_thread
def _tenant_event_keys(tenant_id: int, after_id: int, upto_id: int | None) -> list[tuple[int, str, int]]:
    """(id, job, seq) of the tenant's stored events above ``after_id``, oldest first, one page."""
    rows = JobEvent.objects.filter(job__tenant_id=tenant_id, id__gt=after_id)
    if upto_id is not None:
        rows = rows.filter(id__lte=upto_id)
    return [(i, str(j), s) for i, j, s in rows.order_by("id").values_list("id", "job_id", "seq")[:PAGE]]


@_in_db_thread
def _events_by_id(ids: list[int]) -> list[dict[str, Any]]:
    return _wire(JobEvent.objects.filter(id__in=ids).order_by("id"))


@_in_db_thread
def _tenant_backlog_over(tenant_id: int, after_id: int, limit: int) -> bool:
    beyond = JobEvent.objects.filter(job__tenant_id=tenant_id, id__gt=after_id).order_by("id")[limit : limit + 1]
    return bool(list(beyond.values_list("id", flat=True)))


@_in_db_thread
def _last_sent_ids(seqs: dict[str, int]) -> dict[str, int]:
    """Per job, the id of the event at its last sent seq."""
    if not seqs:
        return {}
    wanted = Q()
    for job_id, seq in seqs.items():
        wanted |= Q(job_id=job_id, seq=seq)
    return {str(j): i for j, i in JobEvent.objects.filter(wanted).values_list("job_id", "id")}


@_in_db_thread
def _fill(holes: list[Hole], floor: int) -> dict[Hole, list[dict[str, Any]]]:
    wanted = Q()
    for h in holes:
        wanted |= Q(job_id=h.job_id, seq__lt=h.before) & (Q(id__gt=floor) if h.after is None else Q(seq__gt=h.after))
    events = _wire(JobEvent.objects.filter(wanted).order_by("id"))
    return {h: [e for e in events if e["job_id"] == h.job_id and (h.after or 0) < e["seq"] < h.before] for h in holes}


# -- helpers ----------------------------------------------------------------------------------
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


class _EventStream(AsyncWebsocketConsumer):  # type: ignore[misc]
    """Authentication, the live buffer, batching, backpressure and the flood guard; subclasses
    say which events, how to replay them and how frames look."""

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
                    if not await _still_allowed(self.scope.get("user"), self.scope.get("api_token")):
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
        filled = await _fill(holes, self.delivered.floor) if holes else {}
        events: list[dict[str, Any]] = []
        for item in planned:
            events.extend(filled.get(item, []) if isinstance(item, Hole) else [item])
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


class JobStreamConsumer(_EventStream):
    """One job's events; the cursor is the job's last seq sent."""

    query_params = ("after", "replay")

    async def open_stream(self, user: Any, token: ApiToken | None, query: dict[str, str]) -> int | None:
        job = await _authorized_job(user, token, self.scope["url_route"]["kwargs"]["job_id"])
        if job is None:
            return CLOSE_NOT_FOUND
        raw = query.get("after", "0")
        after = int(raw) if raw.isdecimal() else -1
        if after < 0:
            if self.query_params is not None:
                raise BadQuery("after", f"must be an integer >= 0, got {raw!r}")
            after = 0
        self.job_id = str(job.pk)
        self.group = job_group(job.pk)
        self.delivered.seqs[self.job_id] = after
        # ``?replay=status,log``: replay only these kinds (a page that takes its metric history
        # downsampled over REST need not receive every stored metrics event); live, all kinds.
        kinds = query.get("replay")
        self.replay_kinds = set(kinds.split(",")) if kinds else None
        unknown = sorted(self.replay_kinds - set(EventKind.values)) if self.replay_kinds else []
        if unknown and self.query_params is not None:
            kinds_known = ", ".join(EventKind.values)
            raise BadQuery("replay", f"must be event kinds among {kinds_known}; got {','.join(unknown)!r}")
        return None

    async def replay(self) -> bool:
        self.delivered.seqs[self.job_id] = await _job_replay_start(self.job_id, self.cursor())
        if self.replay_kinds is None:
            return await self._send_stored()
        sent = False
        while True:
            events = await _job_events_after(self.job_id, self.cursor())
            wanted = [e for e in events if e["kind"] in self.replay_kinds]
            await self.send_events(wanted)
            if events:  # skipped kinds count as delivered
                self.delivered.seqs[self.job_id] = max(self.cursor(), events[-1]["seq"])
            sent = sent or bool(wanted)
            if len(events) < PAGE:
                return sent

    async def catch_up(self) -> None:
        await self._send_stored()

    async def audit(self) -> None:
        await self._send_stored()

    async def _send_stored(self) -> bool:
        sent = False
        while True:
            events = await _job_events_after(self.job_id, self.cursor())
            await self.send_events(events)
            sent = sent or bool(events)
            if len(events) < PAGE:
                return sent

    def cursor(self) -> int:
        return self.delivered.seqs[self.job_id]


class LegacyJobStreamConsumer(JobStreamConsumer):
    """``/ws/jobs/<id>/``: the frame shape the dashboard parses (frontend/src/live/eventLog.ts)."""

    query_params = None  # as the dashboard always sent them: a bad ``after`` replays from the start

    async def send_frame(self, events: list[dict[str, Any]], encoded: list[str]) -> None:
        for event in events:
            payload = {k: v for k, v in event.items() if k != "job_id"}
            await self.send_json({"type": "event", "event": payload})

    async def send_resync(self) -> None:
        """Nothing to say: the events that follow come from the database, in order."""


class TenantStreamConsumer(_EventStream):
    """Every event of every job of one tenant. The cursor is ``Delivered.encode()``: opaque to
    clients, who send back the last one they got."""

    query_params = ("after", "tenant")

    async def open_stream(self, user: Any, token: ApiToken | None, query: dict[str, str]) -> int | None:
        tenant_id = await _authorized_tenant(user, token, query.get("tenant"))
        if tenant_id is None:
            return CLOSE_FORBIDDEN
        self.resuming = "after" in query
        if self.resuming:
            try:
                self.delivered = Delivered.decode(query["after"])
            except ValueError:
                raise BadQuery("after", "is not a cursor this stream gave out") from None
        self.tenant_id = tenant_id
        self.group = tenant_group(tenant_id)
        self.mark: int | None = None  # latest event id at the previous audit
        return None

    async def replay(self) -> bool:
        if not self.resuming:
            self.delivered.floor = await _latest_event_id()  # after joining the group: no gap
            return False
        if await _tenant_backlog_over(self.tenant_id, self.delivered.floor, REPLAY_LIMIT):
            # Too far behind to replay: start from now and say so; the client reloads its state.
            self.delivered = Delivered(floor=await _latest_event_id())
            await self.send_json({"type": "reset", "cursor": self.cursor()})
            return True
        return await self._send_stored(upto=None)

    async def catch_up(self) -> None:
        await self._send_stored(upto=None)

    async def audit(self) -> None:
        """Send stored events up to the id seen at the previous audit that never came live,
        then raise the floor to it: by now everything below it has committed (ids are taken at
        insert time, an audit period earlier). Jobs sent nothing above it leave the cursor."""
        mark = await _latest_event_id()
        if self.mark is not None and self.mark > self.delivered.floor:
            await self._send_stored(upto=self.mark)
            last_ids = await _last_sent_ids(self.delivered.seqs)
            seqs = self.delivered.seqs
            for job_id in list(seqs):
                if last_ids.get(job_id, 0) <= self.mark:
                    del seqs[job_id]
            self.delivered.floor = self.mark
        self.mark = mark

    async def _send_stored(self, upto: int | None) -> bool:
        """Stored events above the floor (up to ``upto``) not sent yet, oldest first."""
        position, sent = self.delivered.floor, False
        while True:
            keys = await _tenant_event_keys(self.tenant_id, position, upto)
            unsent = [i for i, job_id, seq in keys if self.delivered.is_new(job_id, seq)]
            if unsent:
                await self.send_events(await _events_by_id(unsent))
                sent = True
            if len(keys) < PAGE:
                return sent
            position = keys[-1][0]

    def cursor(self) -> str:
        return self.delivered.encode()
