"""Admission as a tenant and an admin see it: who gets capacity, in what order, and the
reason every other job gives for waiting. Passes run directly (no worker), on the real
Postgres, against the settings' cluster of 8 H100s."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from tenants.models import QUOTA_DECISIONS_LOCK_KEY, Quota
from tests.engine.builders import make_spec
from tests.web.admission_pass import pass_held_mid_decision
from webapp import engine_gateway
from webapp.jobs import admission
from webapp.jobs.models import Job, JobCheckpoint, JobStatus, TenantShare, UsageRecord
from webapp.jobs.services import engine_events
from webapp.jobs.services.submit import job_submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def eight_h100(settings: Any) -> None:
    settings.ENGINE_CLUSTER = {"num_nodes": 1, "devices_per_node": 8, "device_type": "h100"}


def quota(actor: Any, **fields: Any) -> None:
    Quota.objects.filter(tenant=actor.tenant).update(**fields)


def submit(actor: Any, gpus: int, priority: float = 1.0, name: str = "j") -> Job:
    spec = make_spec(name=name, resources={"num_gpus": gpus}, priority=priority)
    return job_submit(tenant=actor.tenant, user=actor.user, name=name, spec=spec)


def reason(job: Job) -> str:
    job.refresh_from_db()
    return job.status_reason.split(":", 1)[0]


def admitted(job: Job) -> bool:
    job.refresh_from_db()
    return job.admitted_at is not None


def engine_paused(job: Job, step: int = 2) -> None:
    """The engine reports the pause at a step boundary, through the event pump's door."""
    event = engine_gateway.EngineEvent(
        seq=job.last_event_seq + 1000,
        pipeline_id=str(job.pk),
        kind=engine_gateway.EventKind.STATUS,
        sim_time_s=0.0,
        data={"status": "paused", "reason": f"paused after step {step}", "step": step},
    )
    engine_events.engine_events_ingest(engine_id="test-engine", events=[event], next_cursor=event.seq)


def test_borrowing_idle_capacity_then_reclaiming_it_after_a_checkpoint(make_actor) -> None:
    a, b = make_actor("acme"), make_actor("globex")
    quota(a, guaranteed_gpus={"h100": 4}, borrow_limit_gpus=4)
    quota(b, guaranteed_gpus={"h100": 4}, borrow_limit_gpus=0)
    own, lent = submit(a, 4, name="own"), submit(a, 4, name="lent")
    result = admission.admission_tick()
    assert set(result.admitted) == {str(own.pk), str(lent.pk)}
    own.refresh_from_db()
    lent.refresh_from_db()
    assert not own.borrowed and lent.borrowed  # beyond the guarantee, on globex's idle GPUs

    too_many = submit(a, 2, name="third")
    admission.admission_tick()
    assert reason(too_many) == "quota"  # 10 > guarantee 4 + borrow 4

    # globex wants what it is guaranteed: only the borrowed job is asked to pause, and it
    # keeps its GPUs until it reaches its checkpoint.
    Job.objects.filter(pk__in=[own.pk, lent.pk]).update(status=JobStatus.RUNNING)
    theirs = submit(b, 4, name="theirs")
    result = admission.admission_tick()
    assert result.reclaiming == [str(lent.pk)]
    lent.refresh_from_db()
    own.refresh_from_db()
    assert lent.status == JobStatus.PAUSING and own.status == JobStatus.RUNNING
    assert reason(theirs) == "capacity" and "reclaiming" in theirs.status_reason
    assert admission.admission_tick().reclaiming == []  # asked once, not again each pass

    engine_paused(lent)
    lent.refresh_from_db()  # a reclaimed job queues again by itself, to go on from its checkpoint
    assert lent.status == JobStatus.QUEUED and "reclaimed" in lent.status_reason
    assert JobCheckpoint.objects.filter(job=lent, step=2).exists()
    assert admission.admission_tick().admitted == [str(theirs.pk)]
    assert not admitted(lent) and reason(lent) == "capacity"  # globex uses its guarantee now


def test_a_waiting_higher_priority_job_is_not_starved_by_smaller_ones(make_actor) -> None:
    a, b = make_actor("acme"), make_actor("globex")
    for actor in (a, b):
        quota(actor, guaranteed_gpus={"h100": 8}, borrow_limit_gpus=0, priority_limit=5.0)
    running = submit(a, 6, name="running")
    admission.admission_tick()
    assert admitted(running)
    urgent = submit(b, 4, priority=3.0, name="urgent")
    small = submit(a, 2, priority=1.0, name="small")
    admission.admission_tick()
    assert reason(urgent) == "capacity"
    assert reason(small) == "priority"  # it would fit, but urgent is first in line
    assert not admitted(small)


def test_fair_share_orders_equal_priority_by_decayed_usage_over_weight(make_actor) -> None:
    heavy, light = make_actor("acme"), make_actor("globex")
    for actor in (heavy, light):
        quota(actor, guaranteed_gpus={"h100": 8}, borrow_limit_gpus=0)
    TenantShare.objects.create(tenant=heavy.tenant, decayed_gpu_seconds=10 * 3600.0)
    first_heavy = submit(heavy, 8, name="heavy")  # submitted first ...
    then_light = submit(light, 8, name="light")
    result = admission.admission_tick()
    assert result.admitted == [str(then_light.pk)]  # ... but the light user goes first
    assert reason(first_heavy) == "capacity"

    # Light has now used an hour; heavy's ten hours over a weight of 100 count for less.
    Job.objects.filter(pk=then_light.pk).update(status=JobStatus.SUCCEEDED, admitted_at=None)
    TenantShare.objects.create(tenant=light.tenant, decayed_gpu_seconds=3600.0)
    quota(heavy, fair_share_weight=100.0)
    again = submit(light, 8, name="light-2")
    assert admission.admission_tick().admitted == [str(first_heavy.pk)]
    assert reason(again) == "capacity"


def test_monthly_budget_blocks_new_jobs_and_can_pause_running_ones(make_actor) -> None:
    a = make_actor("acme")
    quota(a, monthly_gpu_hours=1.0)
    running = submit(a, 2, name="running")
    admission.admission_tick()
    Job.objects.filter(pk=running.pk).update(status=JobStatus.RUNNING)
    waiting = submit(a, 2, name="waiting")
    UsageRecord.objects.create(job=running, tenant=a.tenant, device_type="h100", gpu_seconds=3700.0)
    admission.admission_tick()
    assert reason(waiting) == "budget"
    running.refresh_from_db()
    assert running.status == JobStatus.RUNNING  # action "block": running jobs go on

    quota(a, budget_action="pause")
    result = admission.admission_tick()
    assert result.budget_paused == [str(running.pk)]
    running.refresh_from_db()
    assert running.status == JobStatus.PAUSING and running.status_reason.startswith("budget")

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {a.token}")
    r = c.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 422 and r.json()["error"]["code"] == "budget_exhausted"


def test_max_running_jobs_keeps_the_rest_queued_with_quota_reason(make_actor) -> None:
    a = make_actor("acme")
    quota(a, max_running_jobs=1)
    first, second = submit(a, 1), submit(a, 1)
    admission.admission_tick()
    assert admitted(first) and not admitted(second)
    second.refresh_from_db()
    assert second.status_reason == "quota: 1 jobs running, the limit is 1"


def test_only_one_process_admits_at_a_time(make_actor) -> None:
    a = make_actor("acme")
    job = submit(a, 1)
    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=connection.settings_dict["NAME"]
    ) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [QUOTA_DECISIONS_LOCK_KEY])
        assert admission.admission_tick().leader is False
        assert not admitted(job)
        other.execute("SELECT pg_advisory_unlock(%s)", [QUOTA_DECISIONS_LOCK_KEY])
    assert admission.admission_tick().admitted == [str(job.pk)]


def test_a_submit_never_waits_for_an_admission_pass(make_actor, monkeypatch) -> None:
    """A pass deciding about many queued jobs must not hold up submits: it reads quotas
    without row locks. Here a pass is held mid-decision while the same tenant submits."""
    import time

    a = make_actor("acme")
    submit(a, 1)
    with pass_held_mid_decision(monkeypatch):
        started = time.monotonic()
        submit(a, 1, name="while-admitting")
        waited = time.monotonic() - started
    assert waited < 5, f"the submit waited {waited:.1f}s for the admission pass"


def test_a_quota_edit_waits_for_the_admission_pass_in_progress(make_actor) -> None:
    from tenants.services import quota_update

    a = make_actor("acme")
    db = settings.DATABASES["default"]
    done = threading.Event()

    def edit() -> None:
        try:
            quota_update(tenant=a.tenant, changes={"max_running_jobs": 1}, actor=a.user)
            done.set()
        finally:
            connection.close()

    with psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=connection.settings_dict["NAME"]
    ) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [QUOTA_DECISIONS_LOCK_KEY])  # a pass deciding
        thread = threading.Thread(target=edit)
        thread.start()
        assert not done.wait(1.0), "the quota changed under a pass in progress"
        other.execute("SELECT pg_advisory_unlock(%s)", [QUOTA_DECISIONS_LOCK_KEY])
    thread.join(timeout=10)
    assert done.is_set()
    assert Quota.objects.get(tenant=a.tenant).max_running_jobs == 1


def test_concurrent_submits_never_overshoot_max_queued_jobs(make_actor) -> None:
    a = make_actor("acme")
    quota(a, max_queued_jobs=3)
    statuses: list[int] = []
    start = threading.Barrier(10)

    def one() -> None:
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {a.token}")
        start.wait()
        r = c.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
        statuses.append(r.status_code)
        connection.close()

    threads = [threading.Thread(target=one) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201] * 3 + [422] * 7
    assert Job.objects.filter(tenant=a.tenant).count() == 3


def test_idempotency_under_50_parallel_requests(make_actor) -> None:
    a = make_actor("acme")
    quota(a, max_queued_jobs=100)
    results: list[tuple[int, str | None]] = []
    start = threading.Barrier(50)
    body = {"name": "once", "spec": make_spec()}

    def one() -> None:
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {a.token}")
        start.wait()
        r = c.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="same-key")
        results.append((r.status_code, r.json().get("id")))
        connection.close()

    threads = [threading.Thread(target=one) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Job.objects.filter(tenant=a.tenant).count() == 1
    job_id = str(Job.objects.get(tenant=a.tenant).pk)
    assert {s for s, _ in results} <= {201, 409}
    assert all(i == job_id for s, i in results if s == 201)
    assert any(s == 201 for s, _ in results)


def test_list_endpoints_use_a_fixed_number_of_queries(make_actor, admin_user) -> None:
    """Query-count baselines: more rows must not mean more queries (no N+1)."""
    from django.test.utils import CaptureQueriesContext

    from tenants.services import api_token_create

    a = make_actor("acme")
    quota(a, max_queued_jobs=100)
    tenant_client = APIClient()
    tenant_client.credentials(HTTP_AUTHORIZATION=f"Bearer {a.token}")
    admin_client = APIClient()
    admin_client.force_login(admin_user)
    routes = [
        (tenant_client, "/api/v1/jobs"),
        (tenant_client, "/api/v1/api-keys"),
        (tenant_client, "/api/v1/usage"),
        (admin_client, "/api/v1/admin/queue"),
        (admin_client, "/api/v1/admin/tenants"),
        (admin_client, "/api/v1/admin/audit"),
    ]

    def grow(n: int) -> None:
        for i in range(n):
            job = submit(a, 1, name=f"g{i}")
            UsageRecord.objects.create(
                job=job, tenant=a.tenant, device_type="h100", gpu_seconds=1.0, source=f"test:{job.pk}"
            )
            api_token_create(tenant=a.tenant, user=a.user, name=f"k{i}")
        make_actor(f"t{Job.objects.count()}")  # one more tenant for the admin lists

    def counts() -> list[int]:
        out = []
        for client, url in routes:
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200, url
            out.append(len(ctx.captured_queries))
        return out

    grow(2)
    counts()  # warm: a token's first use of the minute records last_used_at
    small = counts()
    grow(4)
    assert counts() == small, dict(zip([u for _, u in routes], small, strict=True))
