"""The engine-event pump writes a batch the way a job's page and its bill must see it: every
event stored once, numbered in order, each device-second billed once, and every event on the
job's and tenant's streams; and it does so in a number of queries and channel-layer messages
that grows with the jobs in a batch, not with their events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing.websocket import WebsocketCommunicator
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants.models import Quota
from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.asgi import application
from webapp.jobs import task_queue
from webapp.jobs.models import EngineCursor, Job, JobCheckpoint, JobEvent, JobMetrics, JobStatus, UsageRecord
from webapp.jobs.realtime import job_group, tenant_group
from webapp.jobs.services import engine_events
from webapp.jobs.services.submit import job_submit

pytestmark = pytest.mark.django_db(transaction=True)

ENGINE = "test-engine"
STEP_DEVICE_S = 4.0
END_DEVICE_S = 1.5


@pytest.fixture(autouse=True)
def no_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    """No admission pass after a job ends: these tests feed the engine's events themselves."""
    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)


@pytest.fixture()
def make_actor(make_actor: Any) -> Any:
    """Actors whose quota lets every job these tests submit wait in the queue."""

    def make(slug: str) -> Any:
        actor = make_actor(slug)
        Quota.objects.filter(tenant=actor.tenant).update(max_queued_jobs=100)
        return actor

    return make


def submit(actor: Any, steps: int) -> str:
    spec = make_spec(trainer={"total_steps": steps})
    return str(job_submit(tenant=actor.tenant, user=actor.user, name="p", spec=spec).pk)


class EngineLog:
    """Engine events numbered as the engine numbers them (one sequence for every job)."""

    def __init__(self) -> None:
        self.seq = 0

    def event(self, job_id: str, kind: engine_gateway.EventKind, data: dict[str, Any]) -> engine_gateway.EngineEvent:
        self.seq += 1
        return engine_gateway.EngineEvent(seq=self.seq, pipeline_id=job_id, kind=kind, sim_time_s=0.0, data=data)

    def runs(self, job_ids: list[str], steps: int) -> list[engine_gateway.EngineEvent]:
        """Each job starts, reports ``steps`` steps and a log line, and succeeds; the jobs'
        events interleaved, as the engine runs them side by side."""
        status, metrics, log = (
            engine_gateway.EventKind.STATUS,
            engine_gateway.EventKind.METRICS,
            engine_gateway.EventKind.LOG,
        )
        events = [self.event(j, status, {"status": "running", "reason": "running"}) for j in job_ids]
        for step in range(1, steps + 1):
            for j in job_ids:
                values = {"reward/mean": step / 10, "usage/device_seconds": STEP_DEVICE_S}
                events.append(self.event(j, metrics, {"step": step, "total_steps": steps, "metrics": values}))
        events += [self.event(j, log, {"level": "info", "message": "saved"}) for j in job_ids]
        end = {"status": "succeeded", "reason": "done", "device_seconds": END_DEVICE_S}
        return events + [self.event(j, status, end) for j in job_ids]


def ingest(events: list[engine_gateway.EngineEvent]) -> int:
    """Queries one pump batch takes to store ``events``."""
    with CaptureQueriesContext(connection) as queries:
        engine_events.engine_events_ingest(engine_id=ENGINE, events=events, next_cursor=events[-1].seq)
    return len(queries.captured_queries)


def stored(job_id: str) -> list[tuple[int, str]]:
    return list(JobEvent.objects.filter(job_id=job_id).order_by("id").values_list("seq", "kind"))


def test_a_batch_is_stored_in_order_and_billed_once_in_queries_per_job_not_per_event(make_actor) -> None:
    actor = make_actor("acme")
    log = EngineLog()
    ingest(log.runs([submit(actor, 2)], steps=2))  # the tenant's first bill creates its fair-share row

    short, long = [submit(actor, 2) for _ in range(3)], [submit(actor, 12) for _ in range(3)]
    short_events, long_events = log.runs(short, steps=2), log.runs(long, steps=12)
    short_queries, long_queries = ingest(short_events), ingest(long_events)
    # Three jobs each time, 15 events against 45: the same statements, only longer.
    assert (len(short_events), len(long_events)) == (15, 45) and long_queries == short_queries

    # Checkpoints: every trainer.save_freq steps (5 by default) and at the last step.
    for job_id, steps, checkpoints in [*((j, 2, [2]) for j in short), *((j, 12, [5, 10, 12]) for j in long)]:
        job = Job.objects.get(pk=job_id)
        # queued at submit, running, one metrics event per step, the log line, succeeded
        kinds = ["status", "status", *["metrics"] * steps, "log", "status"]
        assert stored(job_id) == list(enumerate(kinds, start=1)), "numbered 1, 2, 3... in the engine's order"
        assert job.last_event_seq == len(kinds) and job.status == JobStatus.SUCCEEDED
        assert job.current_step == steps and job.admitted_at is None
        assert list(JobMetrics.objects.filter(job=job).order_by("step").values_list("step", flat=True)) == list(
            range(1, steps + 1)
        )
        assert list(JobCheckpoint.objects.filter(job=job).values_list("step", flat=True)) == checkpoints
        bills = list(UsageRecord.objects.filter(job=job).order_by("id").values_list("step", "gpu_seconds"))
        assert bills == [*((s, STEP_DEVICE_S) for s in range(1, steps + 1)), (None, END_DEVICE_S)]
        assert job.gpu_seconds == pytest.approx(steps * STEP_DEVICE_S + END_DEVICE_S)


def test_a_batch_pumped_again_changes_nothing_and_a_redone_step_is_billed_not_stored_twice(make_actor) -> None:
    actor = make_actor("acme")
    job_id = submit(actor, 3)
    log = EngineLog()
    # Status, metrics and bills are idempotent; a log line is stored as often as it is sent.
    events = [e for e in log.runs([job_id], steps=3) if e.kind is not engine_gateway.EventKind.LOG]
    ingest(events)
    before = (stored(job_id), UsageRecord.objects.count(), Job.objects.get(pk=job_id).gpu_seconds)

    EngineCursor.objects.update(cursor=0)  # a pump that crashed after storing reads it all again
    ingest(events)
    assert (stored(job_id), UsageRecord.objects.count(), Job.objects.get(pk=job_id).gpu_seconds) == before

    # Step 2 again after a recovery (a new engine event): it used the GPUs twice, its metrics stay once.
    again = {"step": 2, "total_steps": 3, "metrics": {"usage/device_seconds": STEP_DEVICE_S}}
    ingest([log.event(job_id, engine_gateway.EventKind.METRICS, again)])
    assert stored(job_id) == before[0] and JobMetrics.objects.filter(job_id=job_id).count() == 3
    assert UsageRecord.objects.count() == before[1] + 1
    assert Job.objects.get(pk=job_id).gpu_seconds == pytest.approx(before[2] + STEP_DEVICE_S)


async def receive_all(channel: str) -> list[dict[str, Any]]:
    """Every message the channel layer holds for ``channel``, oldest first."""
    layer, messages = get_channel_layer(), []
    while True:
        try:
            messages.append(await asyncio.wait_for(layer.receive(channel), timeout=0.5))
        except TimeoutError:
            return messages


@pytest.mark.asyncio
async def test_a_batch_reaches_each_job_and_tenant_group_in_one_message_with_every_event(make_actor) -> None:
    actor = await sync_to_async(make_actor)("acme")
    jobs = [await sync_to_async(submit)(actor, 3) for _ in range(2)]
    layer = get_channel_layer()
    listeners = {}
    for group in (job_group(jobs[0]), job_group(jobs[1]), tenant_group(actor.tenant.pk)):
        listeners[group] = await layer.new_channel()
        await layer.group_add(group, listeners[group])

    events = EngineLog().runs(jobs, steps=3)
    await sync_to_async(ingest)(events)

    wanted, seqs = [], dict.fromkeys(jobs, 1)  # each job's seq 1: queued, at submit
    for event in events:
        seqs[event.pipeline_id] += 1
        wanted.append((event.pipeline_id, seqs[event.pipeline_id]))
    for group, channel in listeners.items():
        messages = await receive_all(channel)
        assert [m["type"] for m in messages] == ["job.events"], "one message per group per batch"
        sent = [(e["job_id"], e["seq"]) for e in messages[0]["events"]]
        assert sent == [key for key in wanted if group == tenant_group(actor.tenant.pk) or job_group(key[0]) == group]


@pytest.mark.asyncio
async def test_sockets_get_every_event_of_a_batch_once_in_order(make_actor) -> None:
    actor = await sync_to_async(make_actor)("acme")
    job_id = await sync_to_async(submit)(actor, 4)
    auth = [(b"authorization", f"Bearer {actor.token}".encode())]
    v1 = WebsocketCommunicator(application, f"/ws/v1/jobs/{job_id}?after=1", headers=auth)
    legacy = WebsocketCommunicator(application, f"/ws/jobs/{job_id}/?after=1", headers=auth)
    for ws in (v1, legacy):
        assert (await ws.connect(timeout=5))[0]
    assert (await v1.receive_json_from(timeout=5))["events"] == []  # live from seq 1 on

    await sync_to_async(ingest)(EngineLog().runs([job_id], steps=4))

    expected = [("status", 2), *(("metrics", s) for s in range(3, 7)), ("log", 7), ("status", 8)]
    frame = await v1.receive_json_from(timeout=5)
    assert [(e["kind"], e["seq"]) for e in frame["events"]] == expected and frame["cursor"] == 8
    legacy_frames = [await legacy.receive_json_from(timeout=5) for _ in expected]
    assert {f["type"] for f in legacy_frames} == {"event"}, "the dashboard's path: one frame per event"
    assert [(f["event"]["kind"], f["event"]["seq"]) for f in legacy_frames] == expected
    for ws in (v1, legacy):
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
