"""What the worker spends on a job once it is admitted: its dispatch reads the job in one
query, and a pump pass costs the same statements however many jobs it moves, because jobs
that change the same fields share one UPDATE. In the soak each pass carries a few events of
dozens of jobs at different points of their lives (starting, running, finishing), so a cost
per job touched is a cost paid several times per job."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants.models import Quota
from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.jobs import task_queue, tasks
from webapp.jobs.models import Job, JobCheckpoint, JobEvent, JobStatus, UsageRecord
from webapp.jobs.services import engine_events, lifecycle, submit

pytestmark = pytest.mark.django_db(transaction=True)

STATUS, METRICS = engine_gateway.EventKind.STATUS, engine_gateway.EventKind.METRICS
RUNNING_S, STEP_S = 41.5, 17.0
"""Device-seconds billed with ``running`` (the start-up) and with each step's metrics."""


class FakeEngine:
    """The engine as the pump sees it: one numbered log of every job's events."""

    def __init__(self) -> None:
        self.log: list[engine_gateway.EngineEvent] = []

    def emit(self, job_id: str, kind: engine_gateway.EventKind, data: dict[str, Any]) -> None:
        seq = len(self.log) + 1
        self.log.append(engine_gateway.EngineEvent(seq=seq, pipeline_id=job_id, kind=kind, sim_time_s=0.0, data=data))

    def pull(self, *, cursor: int, limit: int = 500) -> tuple[str, list[engine_gateway.EngineEvent], int]:
        events = self.log[cursor : cursor + limit]
        return "fake", events, events[-1].seq if events else cursor

    def stage(self, job_id: str, stage: int) -> None:
        """The three passes of a 3-step job's life, as the engine reports them."""
        if stage == 0:
            self.emit(job_id, STATUS, {"status": "queued", "reason": "waiting for devices"})
            self.emit(job_id, STATUS, {"status": "starting", "reason": "placed on 2 devices"})
        elif stage == 1:
            self.emit(job_id, STATUS, {"status": "running", "reason": "training", "device_seconds": RUNNING_S})
            self.metrics(job_id, 1)
        else:
            self.metrics(job_id, 2)
            self.metrics(job_id, 3)
            self.emit(job_id, STATUS, {"status": "succeeded", "reason": "completed 3 steps"})

    def metrics(self, job_id: str, step: int) -> None:
        values = {"reward/mean": step / 10, "usage/device_seconds": STEP_S}
        self.emit(job_id, METRICS, {"step": step, "total_steps": 3, "metrics": values})


@pytest.fixture()
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    fake = FakeEngine()
    monkeypatch.setattr(engine_gateway, "pull_events", fake.pull)
    monkeypatch.setattr(engine_gateway, "known_engine_id", lambda: "fake")
    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)  # these tests run no admission
    return fake


@pytest.fixture()
def acme(make_actor: Any) -> Any:
    actor = make_actor("acme")
    Quota.objects.filter(tenant=actor.tenant).update(max_queued_jobs=100)
    return actor


def admitted_jobs(actor: Any, count: int) -> list[str]:
    spec = make_spec(trainer={"total_steps": 3})
    jobs = [str(submit.job_submit(tenant=actor.tenant, user=actor.user, name="p", spec=spec).pk) for _ in range(count)]
    for job in Job.objects.filter(pk__in=jobs):
        assert lifecycle.job_admit(job=job, borrowed=False)
    return jobs


def pump_three_cohorts(engine: FakeEngine, actor: Any, size: int) -> tuple[int, list[list[str]]]:
    """Three cohorts of ``size`` jobs, one pass apart: the third pass starts the newest, runs
    the middle one and finishes the oldest. Returns that pass's statements and the cohorts."""
    cohorts = [admitted_jobs(actor, size) for _ in range(3)]
    for current in range(3):
        for age, cohort in enumerate(reversed(cohorts[: current + 1])):
            for job_id in cohort:
                engine.stage(job_id, age)
        with CaptureQueriesContext(connection) as queries:
            engine_events.engine_events_pump()
    return len(queries.captured_queries), cohorts


def test_a_pass_costs_the_same_statements_for_three_jobs_or_thirty(engine, acme) -> None:
    few, _ = pump_three_cohorts(engine, acme, 1)
    many, cohorts = pump_three_cohorts(engine, acme, 10)
    # Per pass: the cursor read; BEGIN, the cursor's lock, the jobs' lock, the stored metrics
    # steps, the billed sources, the ledger INSERT, the tenant's fair-share row read and saved,
    # the metrics and checkpoint INSERTs, one job UPDATE per set of changed fields (starting;
    # running with its first step; finished), the events INSERT, the tenants' webhook endpoints
    # (none here), the cursor UPDATE, COMMIT; the cursor read again (the engine has nothing
    # more). Before jobs shared UPDATEs, the 30-job pass took 27 statements more than the 3-job one.
    assert few == many == 19

    oldest, middle, newest = cohorts
    queued_reason = "admitted; starting on the engine"
    for job_id in oldest:
        job = Job.objects.get(pk=job_id)
        assert (job.status, job.current_step, job.admitted_at) == (JobStatus.SUCCEEDED, 3, None)
        assert job.started_at is not None and job.finished_at is not None
        events = list(JobEvent.objects.filter(job_id=job_id).order_by("seq").values_list("seq", "kind", "data"))
        assert [(s, k, d.get("status")) for s, k, d in events] == [
            (1, "status", "queued"),  # submitted
            (2, "status", "queued"),  # admitted
            (3, "status", "queued"),  # the engine waits for devices
            (4, "status", "starting"),
            (5, "status", "running"),
            (6, "metrics", None),
            (7, "metrics", None),
            (8, "metrics", None),
            (9, "status", "succeeded"),
        ]
        assert events[1][2]["reason"] == queued_reason and events[2][2]["reason"] == "capacity: waiting for devices"
        assert job.last_event_seq == 9
        bills = list(UsageRecord.objects.filter(job_id=job_id).order_by("id").values_list("step", "gpu_seconds"))
        assert bills == [(None, RUNNING_S), (1, STEP_S), (2, STEP_S), (3, STEP_S)]
        assert job.gpu_seconds == pytest.approx(RUNNING_S + 3 * STEP_S)
        assert list(JobCheckpoint.objects.filter(job_id=job_id).values_list("step", flat=True)) == [3]
    for job_id in middle:
        job = Job.objects.get(pk=job_id)
        assert (job.status, job.current_step, job.last_event_seq) == (JobStatus.RUNNING, 1, 6)
        assert job.started_at is not None and job.finished_at is None and job.admitted_at is not None
        assert job.gpu_seconds == pytest.approx(RUNNING_S + STEP_S)
    for job_id in newest:
        job = Job.objects.get(pk=job_id)
        assert (job.status, job.status_reason, job.last_event_seq) == (JobStatus.STARTING, "placed on 2 devices", 4)
        assert job.started_at is None and job.gpu_seconds == 0.0


def test_a_dispatch_reads_the_job_and_its_latest_checkpoint_in_one_query(engine, acme, monkeypatch) -> None:
    [job_id] = admitted_jobs(acme, 1)
    Job.objects.filter(pk=job_id).update(status=JobStatus.RECOVERING)  # the engine lost it after step 2
    JobCheckpoint.objects.bulk_create([JobCheckpoint(job_id=job_id, step=s) for s in (1, 2)])
    submitted: list[tuple[str, Any]] = []
    monkeypatch.setattr(engine_gateway, "submit_pipeline", lambda *, job_id, spec: submitted.append((job_id, spec)))
    monkeypatch.setattr(tasks.pump_engine_events, "delay", lambda: None)

    with CaptureQueriesContext(connection) as queries:
        assert tasks.dispatch_job(job_id) == "dispatched"
    assert len(queries.captured_queries) == 1
    assert submitted == [(job_id, {**make_spec(trainer={"total_steps": 3, "start_step": 2})})]
