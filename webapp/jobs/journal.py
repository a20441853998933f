"""A job's numbered events and changed fields, gathered during one transaction and written
together: one INSERT for every event, one UPDATE per job, one channel-layer round after commit.

The caller holds each job's row lock (or just created the job) while it appends, so seq
numbers are taken in memory exactly as appending one event at a time would take them.
"""

from __future__ import annotations

from typing import Any

from webapp.jobs.models import Job, JobEvent
from webapp.jobs.realtime import publish_job_events_on_commit


def event_payload(event: JobEvent) -> dict[str, Any]:
    return {"seq": event.seq, "kind": event.kind, "created_at": event.created_at.isoformat(), "data": event.data}


class JobJournal:
    """Writes to locked jobs, held until ``flush``; nothing reaches the database before it."""

    def __init__(self) -> None:
        self.events: list[JobEvent] = []
        self.changed: dict[Any, tuple[Job, set[str]]] = {}

    def append(self, job: Job, kind: str, data: dict[str, Any]) -> JobEvent:
        job.last_event_seq += 1
        event = JobEvent(job=job, seq=job.last_event_seq, kind=kind, data=data)
        self.events.append(event)
        self.touch(job, "last_event_seq")
        return event

    def touch(self, job: Job, *fields: str) -> None:
        """Mark fields of ``job`` (already set on it) to be saved."""
        self.changed.setdefault(job.pk, (job, set()))[1].update(fields)

    def flush(self, *, inserted: Job | None = None) -> None:
        """Save the changed fields, insert the events in the order they were appended (their
        ids follow it), and publish them once the transaction commits. ``inserted``: a job
        whose row was just written whole, appended-to fields included (no UPDATE for it)."""
        for job, fields in self.changed.values():
            if job is inserted:
                continue
            Job.objects.filter(pk=job.pk).update(**{name: getattr(job, name) for name in sorted(fields)})
        JobEvent.objects.bulk_create(self.events)
        publish_job_events_on_commit([(e.job.pk, e.job.tenant_id, event_payload(e)) for e in self.events])
        self.events, self.changed = [], {}
