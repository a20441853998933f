"""A job's numbered events and changed fields, gathered during one transaction and written
together: one INSERT for every event, one UPDATE per set of changed fields (however many jobs
share it), one channel-layer round after commit.

The caller holds each job's row lock (or just created the job) while it appends, so seq
numbers are taken in memory exactly as appending one event at a time would take them.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, models
from django.dispatch import Signal

from webapp.jobs.models import Job, JobEvent
from webapp.jobs.realtime import publish_job_events_on_commit

job_events_journaled = Signal()
"""Sent by ``JobJournal.flush`` inside its transaction with ``events``, the stored events in
order: what else must be written with them (webhook deliveries) is written in the same commit."""


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
        by_fields: dict[tuple[str, ...], list[Job]] = {}
        for job, fields in self.changed.values():
            if job is not inserted:
                by_fields.setdefault(tuple(sorted(fields)), []).append(job)
        for names, jobs in by_fields.items():
            _save_fields(jobs, names)
        JobEvent.objects.bulk_create(self.events)
        if self.events:
            job_events_journaled.send(sender=JobJournal, events=self.events)
        publish_job_events_on_commit([(e.job.pk, e.job.tenant_id, event_payload(e)) for e in self.events])
        self.events, self.changed = [], {}


def append_event(job: Job, kind: str, data: dict[str, Any]) -> JobEvent:
    """One event, written now. The caller holds the job's row lock (or just created it), so
    seq numbers never collide."""
    journal = JobJournal()
    event = journal.append(job, kind, data)
    journal.flush()
    return event


def _save_fields(jobs: list[Job], names: tuple[str, ...]) -> None:
    """Write ``names`` of each of ``jobs`` (only those: another field may be deferred or stale)
    in one UPDATE. A pump pass moves dozens of jobs through the same transition, so one
    statement per set of fields instead of one per job; ``UPDATE ... FROM (VALUES ...)``, as
    ``bulk_update``'s CASE per field and row cost more CPU to build than the UPDATEs it saves."""
    if len(jobs) == 1 or connection.vendor != "postgresql":  # the casts below are PostgreSQL's
        for job in jobs:
            Job.objects.filter(pk=job.pk).update(**{name: getattr(job, name) for name in names})
        return
    fields = [Job._meta.pk, *(Job._meta.get_field(name) for name in names)]
    qn = connection.ops.quote_name
    columns = ", ".join(qn(f.column) for f in fields)
    # Typed by casts (VALUES has no column types), but strings only as ``varchar``: a cast to
    # ``varchar(300)`` would cut a long reason silently, where the column refuses it as UPDATE does.
    casts = ["varchar" if isinstance(f, models.CharField) else f.cast_db_type(connection) for f in fields]
    row = "(" + ", ".join(f"%s::{cast}" for cast in casts) + ")"
    assignments = ", ".join(f"{qn(f.column)} = v.{qn(f.column)}" for f in fields[1:])
    params = [f.get_db_prep_save(getattr(job, f.attname), connection) for job in jobs for f in fields]
    table, pk = qn(Job._meta.db_table), qn(fields[0].column)
    sql = (
        f"UPDATE {table} SET {assignments} FROM (VALUES {', '.join([row] * len(jobs))}) AS v({columns}) "
        f"WHERE {table}.{pk} = v.{pk}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
