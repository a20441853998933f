"""A job's event stream (``/ws/v1/jobs/<id>``) and the dashboard's older one (``/ws/jobs/<id>/``)."""

from __future__ import annotations

from typing import Any

from tenants.models import ApiToken
from webapp.jobs import selectors
from webapp.jobs.consumers.stream import (
    CLOSE_NOT_FOUND,
    PAGE,
    READ_SCOPES,
    REPLAY_LIMIT,
    BadQuery,
    EventStream,
    in_db_thread,
)
from webapp.jobs.models import EventKind, Job
from webapp.jobs.realtime import job_group


@in_db_thread
def _authorized_job(user: Any, token: ApiToken | None, job_id: str) -> Job | None:
    if token is not None and not READ_SCOPES & set(token.scopes):
        return None
    return selectors.job_for_reader(user=user, token=token, job_id=job_id)


_last_event_seq = in_db_thread(selectors.job_last_event_seq)
_events_after = in_db_thread(selectors.job_wire_events_after)


class JobStreamConsumer(EventStream):
    """One job's events; the cursor is the job's last seq sent."""

    stream_kind = "job"

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
        # Past REPLAY_LIMIT stored events, a stream starts at the newest ones, so it stays
        # continuous from where it starts up to the live events.
        last = await _last_event_seq(job_id=self.job_id)
        self.delivered.seqs[self.job_id] = max(self.cursor(), last - REPLAY_LIMIT)
        if self.replay_kinds is None:
            return await self._send_stored()
        sent = False
        while True:
            events = await _events_after(job_id=self.job_id, after=self.cursor(), limit=PAGE)
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
            events = await _events_after(job_id=self.job_id, after=self.cursor(), limit=PAGE)
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
