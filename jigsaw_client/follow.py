"""Following a running job by polling: its events until it ends, its log lines until it ends.

Polling ``/events?after=`` rather than reading the SSE stream: the same calls resume after
any interruption, and every answer is complete and short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from jigsaw_client.client import JigsawClient
from jigsaw_client.models import TERMINAL_STATUSES, JobEvent, LogLine

POLL_S = 0.5


def is_terminal_event(event: JobEvent) -> bool:
    return event["kind"] == "status" and event["data"].get("status") in TERMINAL_STATUSES


def follow_events(
    client: JigsawClient,
    job_id: str,
    *,
    after: int = 0,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[JobEvent]:
    """Every event after ``after``, as they happen; the last one yielded is the terminal status."""
    while True:
        events = client.job_events(job_id, after=after)
        for event in events:
            after = event["seq"]
            yield event
            if is_terminal_event(event):
                return
        if not events:
            sleep(poll_s)


def follow_logs(
    client: JigsawClient,
    job_id: str,
    *,
    after: int = 0,
    follow: bool = True,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[LogLine]:
    """Log lines after ``after``; with ``follow``, keeps waiting for more until the job ends."""
    while True:
        # The status is read before the lines: whatever the job logged before it ended is then
        # in the pages read below, so stopping after them loses nothing.
        ended = not follow or client.get_job(job_id)["status"] in TERMINAL_STATUSES
        while True:
            page = client.job_logs(job_id, after=after)
            yield from page["results"]
            if page["next_after"] is None:
                break
            after = page["next_after"]
        if ended:
            return
        sleep(poll_s)
