"""The jobs API as a client sees it: errors name the field, retries never duplicate a job,
tokens are scoped, cancel works, and everything is tenant-scoped."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import ApiToken
from tests.engine.builders import make_spec
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def submit(c: APIClient, body: dict, key: str | None = None):  # type: ignore[no-untyped-def]
    return c.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY=key or str(uuid.uuid4()))


def test_invalid_spec_names_every_bad_field(make_actor, engine_speed) -> None:
    c = client_for(make_actor("acme").token)
    r = submit(c, {"spec": make_spec(rollout={"n": 0}, resources={"num_gpus": 64})})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "validation_error"
    assert {"field": "spec.rollout.n", "message": "must be >= 1, got 0"} in err["details"]
    assert Job.objects.count() == 0


def test_body_shape_errors_use_the_same_envelope(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    r = submit(c, {"spec": "not an object"})
    assert r.status_code == 400
    assert r.json()["error"]["details"] == [{"field": "spec", "message": "must be a JSON object"}]


def test_idempotency_key_is_required_and_replays(make_actor, engine_speed) -> None:
    c = client_for(make_actor("acme").token)
    r = c.post("/api/v1/jobs", {"spec": make_spec()}, format="json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "idempotency_key_required"

    first = submit(c, {"spec": make_spec()}, key="k-1")
    again = submit(c, {"spec": make_spec()}, key="k-1")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1

    other_body = submit(c, {"spec": make_spec(seed=7)}, key="k-1")
    assert other_body.status_code == 422
    assert other_body.json()["error"]["code"] == "idempotency_key_reused"


def test_quota_cap_on_gpus_per_job(make_actor, engine_speed) -> None:
    c = client_for(make_actor("acme").token)  # quota: at most 8 GPUs per job
    r = submit(c, {"spec": make_spec(resources={"num_gpus": 8})})
    assert r.status_code == 201
    from tenants.models import Quota

    Quota.objects.update(max_gpus_per_job=4)
    r = submit(c, {"spec": make_spec(resources={"num_gpus": 8})})
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["field"] == "spec.resources.num_gpus"


def test_tokens_bad_expired_revoked_and_read_only(make_actor) -> None:
    actor = make_actor("acme")
    assert client_for("jrl_nope_nope").get("/api/v1/jobs").status_code == 401
    assert APIClient().get("/api/v1/jobs").status_code in (401, 403)

    read_only = make_actor("initech", scopes=("jobs:read",))
    assert client_for(read_only.token).get("/api/v1/jobs").status_code == 200
    r = submit(client_for(read_only.token), {"spec": make_spec()})
    assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"

    ApiToken.objects.filter(tenant=actor.tenant).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client_for(actor.token).get("/api/v1/jobs").status_code == 401
    ApiToken.objects.filter(tenant=actor.tenant).update(expires_at=None, revoked_at=timezone.now())
    assert client_for(actor.token).get("/api/v1/jobs").status_code == 401


def test_cancel_a_queued_job_before_the_engine_sees_it(make_actor, engine_speed) -> None:
    # No worker runs in this test: the job stays queued, the cancel task never runs, so the
    # job must show ``cancelling`` (asked) and a second cancel after it ends must be refused.
    c = client_for(make_actor("acme").token)
    job_id = submit(c, {"spec": make_spec()}).json()["id"]
    r = c.post(f"/api/v1/jobs/{job_id}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelling"
    Job.objects.filter(pk=job_id).update(status="cancelled")
    again = c.post(f"/api/v1/jobs/{job_id}/cancel")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"


def test_list_filters_and_queue_position(make_actor, engine_speed) -> None:
    c = client_for(make_actor("acme").token)
    ids = [submit(c, {"spec": make_spec()}).json()["id"] for _ in range(3)]
    listing = c.get("/api/v1/jobs?status=queued").json()["results"]
    assert [j["id"] for j in listing] == list(reversed(ids))  # newest first
    assert sorted(j["queue_position"] for j in listing) == [1, 2, 3]
    # Queue positions come from one annotated query: more rows, no more queries.
    with CaptureQueriesContext(connection) as three:
        c.get("/api/v1/jobs")
    submit(c, {"spec": make_spec()})
    submit(c, {"spec": make_spec()})
    with CaptureQueriesContext(connection) as five:
        assert len(c.get("/api/v1/jobs").json()["results"]) == 5
    assert len(five.captured_queries) == len(three.captured_queries)
    bad = c.get("/api/v1/jobs?status=bogus")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["field"] == "status"
    assert c.get("/api/v1/jobs/not-a-uuid").status_code == 404


def test_session_user_picks_tenant_with_header(make_actor, engine_speed) -> None:
    a, b = make_actor("acme"), make_actor("globex")
    job_b = submit(client_for(b.token), {"spec": make_spec()}).json()["id"]
    c = APIClient()
    c.force_login(a.user)
    assert c.get("/api/v1/me").json()["tenants"] == [{"slug": "acme", "name": "Acme", "role": "owner"}]
    assert c.get(f"/api/v1/jobs/{job_b}").status_code == 404
    assert c.get("/api/v1/jobs", HTTP_X_TENANT="globex").status_code == 403


def test_openapi_schema_describes_jobs(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    r = c.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    assert {"/api/v1/jobs/", "/api/v1/jobs/{id}/", "/api/v1/jobs/{id}/cancel/"} <= set(paths)
    assert set(paths["/api/v1/jobs/"]) == {"get", "post"}
    assert r.json()["components"]["securitySchemes"]["apiToken"]["scheme"] == "bearer"
