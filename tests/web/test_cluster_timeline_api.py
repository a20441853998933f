"""GET /api/v1/cluster/timeline: the finished steps and the verl estimate beside the spans,
with other tenants' steps counted but not named."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.engine.builders import make_spec
from webapp.jobs import admission

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def new_job(c: APIClient, **spec: Any) -> str:
    r = c.post("/api/v1/jobs", {"spec": make_spec(**spec)}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    return str(r.json()["id"])


def test_timeline_reports_finished_steps_mfu_inputs_and_the_verl_estimate(make_actor, engine_speed) -> None:
    from webapp.jobs.tasks import dispatch_job

    a, b = make_actor("acme"), make_actor("globex")
    mine = new_job(client_for(a.token), trainer={"total_steps": 2})
    theirs = new_job(client_for(b.token), trainer={"total_steps": 3})
    admission.admission_tick()
    dispatch_job(mine)
    dispatch_job(theirs)  # speed inf: both ran to the end on the shared cluster
    body = client_for(a.token).get("/api/v1/cluster/timeline?window_s=86400").json()

    steps = body["steps"]
    assert [s["step"] for s in steps if s["job"] == mine] == [1, 2]
    assert [s["step"] for s in steps if s["job"] is None] == [1, 2, 3]  # globex's, unnamed
    assert {s["job_name"] for s in steps if s["job"] is None} == {"another tenant's job"}
    assert theirs not in str(body) and all("pipeline_id" not in s for s in steps)
    assert all(s["end_s"] > s["start_s"] and s["tokens"] > 0 and s["flops"] > 0 for s in steps)
    assert body["peak_flops"] == pytest.approx(989e12)  # h100 bf16

    estimate = body["verl_estimate"]
    assert estimate["steps"] == 5 and estimate["tokens"] == sum(s["tokens"] for s in steps)
    assert estimate["note"] is None and estimate["actual_s"] > 0
    assert 0 < estimate["verl_s"] <= min(estimate["verl_dedicated_s"], estimate["verl_serial_s"]) + 1e-9
    assert estimate["speedup"] == pytest.approx(estimate["verl_s"] / estimate["actual_s"])

    # The engine's clock stops at the last event: a 1 s window holds the last step only.
    last = client_for(a.token).get("/api/v1/cluster/timeline?window_s=1").json()
    assert len(last["steps"]) == 1 and last["verl_estimate"]["steps"] == 1
