"""Every event of every job of one tenant (``/ws/v1/tenant``)."""

from __future__ import annotations

from typing import Any

from tenants.models import ApiToken
from webapp.jobs import selectors
from webapp.jobs.consumers.stream import (
    CLOSE_FORBIDDEN,
    PAGE,
    READ_SCOPES,
    REPLAY_LIMIT,
    BadQuery,
    EventStream,
    in_db_thread,
)
from webapp.jobs.realtime import Delivered, tenant_group


@in_db_thread
def _authorized_tenant(user: Any, token: ApiToken | None, slug: str | None) -> int | None:
    """The id of the tenant this caller may read, or None."""
    if token is not None and not READ_SCOPES & set(token.scopes):
        return None
    return selectors.tenant_id_for_reader(user=user, token=token, slug=slug)


_latest_event_id = in_db_thread(selectors.latest_event_id)
_event_keys = in_db_thread(selectors.tenant_event_keys)
_events_by_id = in_db_thread(selectors.wire_events_by_id)
_backlog_beyond = in_db_thread(selectors.tenant_events_beyond)
_event_ids_at = in_db_thread(selectors.event_ids_at)


class TenantStreamConsumer(EventStream):
    """Every event of every job of one tenant. The cursor is ``Delivered.encode()``: opaque to
    clients, who send back the last one they got."""

    stream_kind = "tenant"

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
        if await _backlog_beyond(tenant_id=self.tenant_id, after_id=self.delivered.floor, limit=REPLAY_LIMIT):
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
            last_ids = await _event_ids_at(seqs=self.delivered.seqs)
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
            keys = await _event_keys(tenant_id=self.tenant_id, after_id=position, upto_id=upto, limit=PAGE)
            unsent = [i for i, job_id, seq in keys if self.delivered.is_new(job_id, seq)]
            if unsent:
                await self.send_events(await _events_by_id(ids=unsent))
                sent = True
            if len(keys) < PAGE:
                return sent
            position = keys[-1][0]

    def cursor(self) -> str:
        return self.delivered.encode()
