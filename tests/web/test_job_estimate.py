"""``POST /api/v1/jobs/estimate`` as a tenant sees it: the simulator's forecast, its cost at the
tenant's price, the queue wait behind what runs, and what would block the job; nothing created."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import Quota
from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.jobs.models import Job, JobStatus, UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def estimate(c: APIClient, spec: dict) -> object:
    return c.post("/api/v1/jobs/estimate", {"spec": spec}, format="json")


def _running(tenant: object, *, num_gpus: int, steps: int, done: int, borrowed: bool = False) -> tuple[Job, dict]:
    """A job of ``tenant`` admitted and ``done`` steps in, as admission and the pump leave it."""
    spec = make_spec(resources={"num_gpus": num_gpus}, trainer={"total_steps": steps})
    job = Job.objects.create(
        tenant=tenant,
        name="held",
        spec=spec,
        resolved_spec=engine_gateway.resolve_spec(spec),
        num_gpus=num_gpus,
        device_type="h100",
        total_steps=steps,
        current_step=done,
        status=JobStatus.RUNNING,
        admitted_at=timezone.now(),
        borrowed=borrowed,
    )
    return job, engine_gateway.forecast_job(spec)


def test_forecast_cost_and_no_wait_on_an_idle_cluster(make_actor, settings) -> None:
    settings.GPU_HOUR_PRICE = 3.0
    c = client_for(make_actor("acme").token)
    r = estimate(c, make_spec(trainer={"total_steps": 20}))
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["steps"] == 20 and body["num_gpus"] == 2 and body["device_type"] == "h100"
    assert 0 < body["step_s"] < body["first_step_s"] < body["total_s"]
    assert body["total_s"] >= body["first_step_s"] + 19 * body["step_s"] * 0.99
    assert body["gpu_hours"] > 0
    assert body["cost"] == {
        "amount": round(body["gpu_hours"] * 3.0, 2),
        "currency": "USD",
        "gpu_hour_price": 3.0,
        "price_source": "default",
    }
    assert body["queue"]["wait_s"] == 0 and body["queue"]["gpus_free"] == 8 and body["queue"]["jobs_ahead"] == 0
    assert body["blocked"] is False and body["blockers"] == [] and body["warnings"] == []
    assert Job.objects.count() == 0


def test_the_estimate_follows_the_spec(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    short = estimate(c, make_spec(trainer={"total_steps": 10})).json()
    long = estimate(c, make_spec(trainer={"total_steps": 30})).json()
    assert long["total_s"] == pytest.approx(short["total_s"] + 20 * short["step_s"], rel=1e-6)
    assert long["gpu_hours"] > short["gpu_hours"] and long["cost"]["amount"] >= short["cost"]["amount"]


def test_the_tenants_own_price(make_actor) -> None:
    actor = make_actor("acme")
    actor.tenant.gpu_hour_price = Decimal("10.5")
    actor.tenant.save()
    body = estimate(client_for(actor.token), make_spec()).json()
    assert body["cost"]["price_source"] == "tenant" and body["cost"]["gpu_hour_price"] == 10.5
    assert body["cost"]["amount"] == round(body["gpu_hours"] * 10.5, 2)


def test_a_bad_spec_gets_the_submits_error(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    bad = make_spec(rollout={"n": 0}, resources={"num_gpus": 64})
    estimated = estimate(c, bad)
    submitted = c.post("/api/v1/jobs", {"spec": bad}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert estimated.status_code == submitted.status_code == 400
    assert estimated.json() == submitted.json()
    assert {"field": "spec.rollout.n", "message": "must be >= 1, got 0"} in estimated.json()["error"]["details"]
    shape = c.post("/api/v1/jobs/estimate", {"spec": "not an object"}, format="json")
    assert shape.status_code == 400
    assert shape.json()["error"]["details"] == [{"field": "spec", "message": "must be a JSON object"}]
    assert Job.objects.count() == 0


def test_estimating_needs_the_scope_submitting_needs(make_actor) -> None:
    read_only = client_for(make_actor("initech", scopes=("jobs:read",)).token)
    r = estimate(read_only, make_spec())
    assert r.status_code == 403
    assert "jobs:write" in r.json()["error"]["message"]
    assert APIClient().post("/api/v1/jobs/estimate", {"spec": make_spec()}, format="json").status_code in (401, 403)


def test_quota_and_budget_blockers_name_their_reason(make_actor) -> None:
    actor = make_actor("acme")
    c = client_for(actor.token)
    Quota.objects.filter(tenant=actor.tenant).update(max_gpus_per_job=4)
    body = estimate(c, make_spec(resources={"num_gpus": 8})).json()
    assert body["blocked"] is True
    assert (
        body["blockers"][0]["field"] == "spec.resources.num_gpus"
        and "limit per job is 4" in body["blockers"][0]["message"]
    )

    spec = make_spec(trainer={"total_steps": 40})
    needed = estimate(c, spec).json()["gpu_hours"]
    Quota.objects.filter(tenant=actor.tenant).update(monthly_gpu_hours=needed / 2, budget_action="block")
    warned = estimate(c, spec).json()
    assert warned["blocked"] is False and warned["warnings"][0]["code"] == "budget"
    Quota.objects.filter(tenant=actor.tenant).update(budget_action="pause")
    paused = estimate(c, spec).json()
    assert paused["blocked"] is True and "would be paused" in paused["blockers"][0]["message"]

    held, _ = _running(actor.tenant, num_gpus=1, steps=5, done=5)
    held.status = JobStatus.SUCCEEDED
    held.save()
    UsageRecord.objects.create(
        job=held, tenant=actor.tenant, device_type="h100", gpu_seconds=needed * 3600, source="t:1"
    )
    spent = estimate(c, spec).json()
    assert spent["blocked"] is True and spent["blockers"][0]["code"] == "budget"
    assert "used" in spent["blockers"][0]["message"]
    # What it says is what a submit does.
    refused = c.post("/api/v1/jobs", {"spec": spec}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "budget_exhausted"


def test_queue_wait_behind_another_tenants_job(make_actor) -> None:
    me, other = make_actor("acme"), make_actor("globex")
    _, forecast = _running(other.tenant, num_gpus=8, steps=20, done=5)
    body = estimate(client_for(me.token), make_spec()).json()
    assert body["queue"]["gpus_free"] == 0
    # The cluster is full until that job's forecast run ends: 15 steps left at its pace.
    assert body["queue"]["wait_s"] == pytest.approx(forecast["total_s"] - 5 * forecast["step_s"], rel=1e-6)
    assert "admission replayed" in body["queue"]["method"]


def test_borrowed_gpus_come_back_for_a_job_within_its_guarantee(make_actor) -> None:
    me, other = make_actor("acme"), make_actor("globex")  # acme's guarantee: 4 h100
    _, forecast = _running(other.tenant, num_gpus=8, steps=20, done=5, borrowed=True)
    body = estimate(client_for(me.token), make_spec()).json()
    assert body["queue"]["wait_s"] == pytest.approx(forecast["step_s"], rel=1e-6)


def test_a_tenant_under_its_share_waits_less_than_the_busy_one(make_actor) -> None:
    me, other = make_actor("acme"), make_actor("globex")
    _, held = _running(other.tenant, num_gpus=8, steps=20, done=5)
    held_left_s = held["total_s"] - 5 * held["step_s"]
    c_other = client_for(other.token)
    r = c_other.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201
    queued_run_s = engine_gateway.forecast_job(make_spec())["total_s"]
    # One queued job of equal priority for both; globex's next job waits behind it (same
    # share: submission order).
    theirs = estimate(client_for(other.token), make_spec(resources={"num_gpus": 8})).json()
    mine = estimate(client_for(me.token), make_spec(resources={"num_gpus": 8})).json()
    assert theirs["queue"]["jobs_ahead"] == mine["queue"]["jobs_ahead"] == 1
    assert theirs["queue"]["wait_s"] == pytest.approx(held_left_s + queued_run_s, rel=1e-6)
    # acme holds nothing, so admission puts its job before globex's queued one: it starts as
    # soon as the held job ends.
    assert mine["queue"]["wait_s"] == pytest.approx(held_left_s, rel=1e-6)


def test_a_job_no_pass_would_admit_says_why(make_actor) -> None:
    actor = make_actor("acme")  # guarantee 4 + borrow limit 4 h100
    Quota.objects.filter(tenant=actor.tenant).update(borrow_limit_gpus=0, max_gpus_per_job=8)
    body = estimate(client_for(actor.token), make_spec(resources={"num_gpus": 6})).json()
    assert body["queue"]["wait_s"] is None and body["blocked"] is True
    assert body["blockers"] == [
        {
            "code": "quota",
            "field": "spec.resources.num_gpus",
            "message": "it would wait for ever: would hold 6 h100 GPUs; guarantee + borrow limit is 4",
        }
    ]
