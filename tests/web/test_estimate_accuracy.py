"""An ended job's estimate beside its run, through the whole stack (REST, Celery worker and beat,
the simulated engine), and the tenant's record shown with every new estimate."""

from __future__ import annotations

import statistics
import time
import uuid

import pytest
from rest_framework.test import APIClient

from tests.engine.builders import make_spec
from webapp.jobs.models import Job, JobMetrics

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _client(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def _run_to_the_end(c: APIClient, spec: dict) -> Job:
    r = c.post("/api/v1/jobs", {"spec": spec}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=r.json()["id"])
        if job.status in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job still {Job.objects.get(pk=r.json()['id']).status} after 120 s")


def test_a_finished_jobs_estimate_beside_its_run(celery_worker_thread, engine_speed, make_actor) -> None:
    engine_speed(float("inf"))
    actor = make_actor("acme")
    c = _client(actor.token)
    spec = make_spec(trainer={"total_steps": 8})
    before = c.post("/api/v1/jobs/estimate", {"spec": spec}, format="json").json()
    assert before["record"] is None  # nothing has run yet

    job = _run_to_the_end(c, spec)
    assert job.status == "succeeded", job.status_reason
    r = c.get(f"/api/v1/jobs/{job.pk}/estimate")
    assert r.status_code == 200, r.content
    found = r.json()
    # The estimate is the one the tenant was shown before submitting.
    assert found["estimate"]["step_s"] == pytest.approx(before["step_s"])
    assert found["estimate"]["gpu_hours"] == pytest.approx(before["gpu_hours"])
    times = [
        float(v["timing_s/step"])
        for v in JobMetrics.objects.filter(job=job).order_by("step").values_list("values", flat=True)
    ]
    assert len(times) == 8
    assert found["actual"] == {
        "step_s": pytest.approx(statistics.median(times[1:])),
        "gpu_hours": pytest.approx(job.gpu_seconds / 3600),
        "steps": 8,
        "complete": True,
    }
    actual = found["actual"]["step_s"]
    assert found["error"]["step_s"] == pytest.approx((before["step_s"] - actual) / actual)
    # The test cluster was idle: the run was the idle-cluster case, which the forecast simulates.
    assert abs(found["error"]["idle_cluster_step_s"]) < 0.15
    assert abs(found["error"]["idle_cluster_gpu_hours"]) < 0.15
    assert found["error"]["gpu_hours"] == pytest.approx(
        (before["gpu_hours"] - found["actual"]["gpu_hours"]) / found["actual"]["gpu_hours"]
    )

    after = c.post("/api/v1/jobs/estimate", {"spec": spec}, format="json").json()
    assert after["record"] == {
        "jobs": 1,
        "step_s_error": pytest.approx(found["error"]["step_s"]),
        "gpu_hours_error": pytest.approx(found["error"]["gpu_hours"]),
    }


def test_only_an_ended_job_of_ones_own_tenant(make_actor) -> None:
    me, other = make_actor("acme"), make_actor("globex")
    c = _client(me.token)
    r = c.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    queued = r.json()["id"]
    refused = c.get(f"/api/v1/jobs/{queued}/estimate")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_state"
    assert "has ended" in refused.json()["error"]["message"]
    assert _client(other.token).get(f"/api/v1/jobs/{queued}/estimate").status_code == 404
