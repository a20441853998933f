"""Server-Sent Events: a job's events as ``text/event-stream``, resumable with ``Last-Event-ID``.

For clients that cannot open a WebSocket (curl, proxies that only pass HTTP). Each event's
``id`` is its seq, so a browser's ``EventSource`` resumes after a reconnect by itself. The
stream ends with an ``end`` event once the job is terminal and everything is sent, or after
``MAX_STREAM_S`` (the client reconnects and resumes)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.api.inputs import KnownQueryOnly, int_param
from webapp.api.tenancy import TenantScoped, resolve_tenant
from webapp.jobs import selectors
from webapp.jobs.journal import event_payload
from webapp.jobs.models import TERMINAL_STATUSES, Job, JobEvent

POLL_S = 0.5
HEARTBEAT_S = 15.0
MAX_STREAM_S = 300.0
BATCH = 500


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return json.dumps(data).encode()  # errors only: the stream itself is not rendered


def _events_after(job_id: Any, after: int) -> tuple[list[dict[str, Any]], bool]:
    """(up to ``BATCH`` stored events after ``after``, whether the job has ended)."""
    try:
        events = [
            event_payload(e) for e in JobEvent.objects.filter(job_id=job_id, seq__gt=after).order_by("seq")[:BATCH]
        ]
        ended = not events and Job.objects.filter(pk=job_id, status__in=TERMINAL_STATUSES).exists()
        return events, ended
    finally:
        close_old_connections()


async def _event_frames(job_id: Any, after: int, *, max_s: float = MAX_STREAM_S) -> AsyncIterator[str]:
    """An async iterator, so that under ASGI each frame goes out as it is made (a sync one
    would be read to its end before the first byte)."""
    yield "retry: 2000\n\n"
    started = last_sent = time.monotonic()
    while time.monotonic() - started < max_s:
        events, ended = await sync_to_async(_events_after)(job_id, after)
        for event in events:
            after = event["seq"]
            yield f"id: {event['seq']}\nevent: {event['kind']}\ndata: {json.dumps(event)}\n\n"
        if events:
            last_sent = time.monotonic()
            continue
        if ended:
            yield "event: end\ndata: {}\n\n"
            return
        if time.monotonic() - last_sent > HEARTBEAT_S:
            yield ": keep-alive\n\n"
            last_sent = time.monotonic()
        await asyncio.sleep(POLL_S)


class JobEventStreamView(KnownQueryOnly, APIView):
    permission_classes = [TenantScoped]
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("Last-Event-ID", OpenApiTypes.INT, OpenApiParameter.HEADER, description="Resume after."),
            OpenApiParameter("after", OpenApiTypes.INT, description="Resume after this seq (if no Last-Event-ID)."),
        ],
        responses={(200, "text/event-stream"): OpenApiTypes.STR},
    )
    def get(self, request: Request, pk: str) -> StreamingHttpResponse:
        tenant, _, _ = resolve_tenant(request)
        job = selectors.job_get_for_tenant(tenant=tenant, job_id=pk)
        if job is None:
            raise NotFound()
        after = int_param(request, "after", 0, minimum=0)  # each source is checked, and named, apart
        header = request.headers.get("Last-Event-ID")
        if header:  # EventSource sends none before its first event
            if not header.isdecimal():
                raise ValidationError({"Last-Event-ID": [f"must be an integer event seq >= 0, got {header!r}"]})
            after = int(header)
        response = StreamingHttpResponse(_event_frames(job.pk, after), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
        return response
