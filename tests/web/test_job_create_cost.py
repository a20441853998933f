"""What one job create costs the database, and the behaviour that the cheaper path must keep:
the idempotency answers, the caps checked at submit, the queue position, the token's role."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import Quota, Role
from tenants.services import api_token_create, membership_add
from tests.engine.builders import make_spec
from webapp.jobs.idempotency import STALE_CLAIM_S
from webapp.jobs.models import IdempotencyRecord, Job, JobEvent, JobStatus, UsageRecord
from webapp.jobs.usage import month_start

pytestmark = pytest.mark.django_db(transaction=True)

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def submit(c: APIClient, body: dict[str, Any] | None = None, key: str | None = None) -> Any:
    body = body if body is not None else {"spec": make_spec()}
    return c.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY=key or str(uuid.uuid4()))


def statements(ctx: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]


def test_a_create_costs_nine_statements_in_one_transaction(make_actor, engine_speed) -> None:
    """Query-count baseline of POST /api/v1/jobs (was 12 statements, 2 transactions and a
    savepoint, plus 2 reads on their own): the token with its role; the idempotency claim,
    committed on its own so that a duplicate sees it; then one transaction with the quota's
    row lock, the tenant's queued jobs and month's usage, the job, its event, the tenant's
    webhook endpoints (the event is a status change they may be sent), its queue position and
    the stored response. More jobs in the table must not mean more queries."""
    c = client_for(make_actor("acme").token)
    Quota.objects.update(max_queued_jobs=100)
    submit(c)  # a token's first use of the minute also records last_used_at
    with CaptureQueriesContext(connection) as few:
        assert submit(c).status_code == 201
    for _ in range(3):
        submit(c)
    with CaptureQueriesContext(connection) as more:
        assert submit(c).status_code == 201

    sqls = [q["sql"] for q in more.captured_queries]
    assert len(statements(more)) == 9, "\n".join(sqls)
    assert sum(s == "BEGIN" for s in sqls) == 1 and sum(s == "COMMIT" for s in sqls) == 1, "\n".join(sqls)
    assert not [s for s in sqls if s.startswith("SAVEPOINT")], "\n".join(sqls)
    assert len(statements(few)) == len(statements(more))


def test_the_create_response_is_the_job_as_get_shows_it_and_is_stored_for_replay(make_actor, engine_speed) -> None:
    other = client_for(make_actor("globex").token)
    ahead = [submit(other).json()["id"] for _ in range(2)]  # two jobs queued before, on the cluster
    c = client_for(make_actor("acme").token)

    created = submit(c, key="k-1")
    assert created.status_code == 201
    job = created.json()
    assert job["queue_position"] == len(ahead) + 1
    assert job["last_event_seq"] == 1 and job["status"] == JobStatus.QUEUED
    assert c.get(f"/api/v1/jobs/{job['id']}").json() == job
    events = list(JobEvent.objects.filter(job_id=job["id"]).values_list("seq", "kind", "data"))
    assert events == [(1, "status", {"status": "queued", "reason": "waiting for admission"})]

    replay = submit(c, key="k-1")
    assert replay.status_code == 201 and replay.json() == job and replay["Idempotent-Replayed"] == "true"
    assert Job.objects.filter(tenant__slug="acme").count() == 1


def test_a_duplicate_in_flight_gets_409_and_a_dead_claim_is_taken_over(make_actor, engine_speed) -> None:
    actor = make_actor("acme")
    c = client_for(actor.token)
    body = {"spec": make_spec()}
    from webapp.jobs.idempotency import request_fingerprint

    # A request holding this key is still working (its claim has no response yet).
    IdempotencyRecord.objects.create(tenant=actor.tenant, key="busy", request_hash=request_fingerprint(body))
    in_flight = submit(c, body, key="busy")
    assert in_flight.status_code == 409 and in_flight.json()["error"]["code"] == "idempotency_in_flight"
    assert submit(c, {"spec": make_spec(seed=9)}, key="busy").status_code == 422  # another body

    # That request died long ago: a retry takes the claim over and creates the job once.
    IdempotencyRecord.objects.filter(key="busy").update(
        created_at=timezone.now() - timedelta(seconds=STALE_CLAIM_S + 1)
    )
    taken = submit(c, body, key="busy")
    assert taken.status_code == 201
    assert submit(c, body, key="busy").json()["id"] == taken.json()["id"]
    assert Job.objects.filter(tenant=actor.tenant).count() == 1


def test_a_refused_create_is_stored_and_leaves_no_job(make_actor, engine_speed) -> None:
    actor = make_actor("acme")
    c = client_for(actor.token)
    Quota.objects.update(max_queued_jobs=1)
    assert submit(c).status_code == 201
    refused = submit(c, key="full")
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "quota_exceeded"
    Quota.objects.update(max_queued_jobs=5)
    assert submit(c, key="full").json() == refused.json()  # the stored answer, not a retry
    assert Job.objects.filter(tenant=actor.tenant).count() == 1
    assert JobEvent.objects.filter(job__tenant=actor.tenant).count() == 1


def test_the_budget_at_submit_counts_this_months_usage_only(make_actor, engine_speed) -> None:
    actor = make_actor("acme")
    c = client_for(actor.token)
    Quota.objects.update(monthly_gpu_hours=1.0)
    job = Job.objects.get(pk=submit(c).json()["id"])

    def bill(gpu_hours: float, at: Any, source: str) -> None:
        UsageRecord.objects.create(
            job=job, tenant=actor.tenant, device_type="h100", gpu_seconds=gpu_hours * 3600, source=source, created_at=at
        )

    bill(5.0, month_start() - timedelta(seconds=1), "last-month")  # a budget never carries over
    bill(0.5, month_start(), "this-month-1")
    assert submit(c).status_code == 201
    bill(0.5, timezone.now(), "this-month-2")
    spent = submit(c)
    assert spent.status_code == 422 and spent.json()["error"]["code"] == "budget_exhausted"


def test_a_tokens_role_is_its_users_role_in_the_tenant(make_actor) -> None:
    """An owner's admin key sees every key of the tenant; a member's key sees its own, even one
    with the admin scope (the role grants no more)."""
    owner = make_actor("acme", scopes=("admin",))
    from django.contrib.auth import get_user_model

    member = get_user_model().objects.create_user(username="acme-member", password="pw-member")
    membership_add(tenant=owner.tenant, user=member, role=Role.MEMBER)
    _, member_token = api_token_create(tenant=owner.tenant, user=member, name="member key", scopes=["admin"])

    assert len(client_for(owner.token).get("/api/v1/api-keys").json()["results"]) == 2
    own = client_for(member_token).get("/api/v1/api-keys").json()["results"]
    assert [k["name"] for k in own] == ["member key"]
