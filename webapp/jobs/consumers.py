"""WebSocket stream of one job's events: replay from ``?after=<seq>``, then live, in order.

The consumer joins the job's group *before* reading stored events, then drops any live event
it has already replayed, so a client that reconnects with its last seq sees no gap and no
duplicate. Close codes: 4401 not authenticated, 4404 no such job for this caller.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from tenants.models import ApiToken, Membership
from webapp.jobs.models import Job
from webapp.jobs.realtime import job_group
from webapp.jobs.selectors import job_events_after
from webapp.jobs.services import event_payload

REPLAY_LIMIT = 5000


@database_sync_to_async
def _authorized_job(user: Any, token: ApiToken | None, job_id: str) -> Job | None:
    try:
        jobs = Job.objects.filter(pk=job_id)
        if token is not None:
            if "jobs:read" not in token.scopes and "admin" not in token.scopes:
                return None
            return jobs.filter(tenant=token.tenant).first()
        tenant_ids = Membership.objects.filter(user=user).values("tenant_id")
        return jobs.filter(tenant_id__in=tenant_ids).first()
    except (ValueError, TypeError):
        return None


@database_sync_to_async
def _stored_events(job: Job, after: int) -> list[dict[str, Any]]:
    """Stored events after ``after``; past ``REPLAY_LIMIT`` of them, only the newest ones, so
    the stream stays continuous from where it starts up to the live events."""
    job.refresh_from_db(fields=["last_event_seq"])
    after = max(after, job.last_event_seq - REPLAY_LIMIT)
    return [event_payload(e) for e in job_events_after(job=job, after=after, limit=REPLAY_LIMIT)]


class JobEventsConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    async def connect(self) -> None:
        self.group: str | None = None
        self.last_seq = 0
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        job = await _authorized_job(user, self.scope.get("api_token"), self.scope["url_route"]["kwargs"]["job_id"])
        if job is None:
            await self.close(code=4404)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        self.group = job_group(job.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        for event in await _stored_events(job, self.last_seq):
            await self._send_event(event)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    async def job_event(self, message: dict[str, Any]) -> None:
        await self._send_event(message["event"])

    async def _send_event(self, event: dict[str, Any]) -> None:
        if event["seq"] <= self.last_seq:
            return
        self.last_seq = event["seq"]
        await self.send_json({"type": "event", "event": event})
