"""Pushing job events to WebSocket subscribers through the channel layer (after commit), and
the bookkeeping a stream needs to deliver them exactly once, in order, from live messages that
may be late, duplicated or lost.

Every event carries its job and ``seq`` (1, 2, 3... per job, never skipping), so a stream only
has to remember, per job, the last seq it sent: anything at or below is a duplicate, anything
beyond the next one reveals a gap to fill from the database.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

# A cursor naming more jobs than this is refused (an honest one names the jobs active in the last
# few audit periods; this only bounds what a client can make the server parse and query).
MAX_CURSOR_JOBS = 2000


def job_group(job_id: Any) -> str:
    return f"job.{job_id}"


def tenant_group(tenant_id: int) -> str:
    return f"tenant.{tenant_id}"


def publish_job_event_on_commit(*, job_id: Any, tenant_id: int, event: dict[str, Any]) -> None:
    """Send after the transaction commits: a subscriber never sees an event that rolled back."""

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        message = {"type": "job.event", "job_id": str(job_id), "event": event}

        async def both() -> None:  # one event loop for both sends (each async_to_sync starts one)
            await layer.group_send(job_group(job_id), message)
            await layer.group_send(tenant_group(tenant_id), message)

        try:
            async_to_sync(both)()
        except Exception:  # a down channel layer must not fail the write; clients replay
            logger.warning("could not publish event of job %s", job_id, exc_info=True)

    transaction.on_commit(send)


def wire_event(job_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """An event as v1 streams send it: the stored payload plus its job."""
    return {"job_id": job_id, **event}


@dataclass(frozen=True)
class Hole:
    """Events of ``job_id`` that never arrived live, just before seq ``before``: those above seq
    ``after``, or, for a job this stream has sent nothing of yet (``after`` None), those stored
    above the stream's floor."""

    job_id: str
    after: int | None
    before: int


@dataclass
class Delivered:
    """What one stream has sent. ``seqs``: per job, the last seq sent (everything up to it was
    sent, in order). ``floor`` (tenant streams): every event with a JobEvent id at or below it
    was sent or came before the stream began, so a job absent from ``seqs`` has had nothing
    above the floor sent."""

    seqs: dict[str, int] = field(default_factory=dict)
    floor: int = 0

    def is_new(self, job_id: str, seq: int) -> bool:
        return seq > self.seqs.get(job_id, 0)

    def record(self, event: dict[str, Any]) -> None:
        self.seqs[event["job_id"]] = event["seq"]

    def plan_live(self, batch: list[dict[str, Any]]) -> list[dict[str, Any] | Hole]:
        """Live wire events in arrival order -> the new ones, each preceded by the hole (if any)
        between it and the last one sent of its job. Duplicates are left out."""
        last = dict(self.seqs)
        planned: list[dict[str, Any] | Hole] = []
        for event in batch:
            job_id, seq = event["job_id"], event["seq"]
            seen = last.get(job_id)
            if seen is not None and seq <= seen:
                continue
            if seen is None or seq > seen + 1:
                planned.append(Hole(job_id, seen, seq))
            planned.append(event)
            last[job_id] = seq
        return planned

    # -- tenant cursor ------------------------------------------------------------------------
    # Not simply the highest JobEvent id sent: ids are taken at insert but become visible at
    # commit, so an event with a lower id can commit after a higher one went out, and a client
    # resuming "after the highest id" would never get it. The floor only moves up to ids that
    # had time to commit (the stream's audit); above it the cursor names each job's last seq.

    def encode(self) -> str:
        """``<floor>`` then ``.<job uuid hex>-<seq>`` per job: URL-safe, opaque to clients."""
        return str(self.floor) + "".join(f".{uuid.UUID(j).hex}-{s}" for j, s in sorted(self.seqs.items()))

    @classmethod
    def decode(cls, raw: str) -> Delivered:
        """The inverse of ``encode``; ValueError for anything it did not produce."""
        head, *jobs = raw.split(".")
        if len(jobs) > MAX_CURSOR_JOBS or not head.isdigit():
            raise ValueError("malformed cursor")
        seqs: dict[str, int] = {}
        for item in jobs:
            job_hex, _, seq = item.partition("-")
            if len(job_hex) != 32 or not seq.isdigit():
                raise ValueError("malformed cursor")
            seqs[str(uuid.UUID(hex=job_hex))] = int(seq)
        return cls(seqs=seqs, floor=int(head))
