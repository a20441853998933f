"""Pause and resume through the whole stack (REST, Celery worker and beat, the engine): the
job stops at a step boundary, its capacity returns, and on resume it continues from that
checkpoint with no step lost or repeated."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from tests.engine.builders import make_spec
from webapp.jobs.models import Job, JobCheckpoint, JobMetrics, UsageRecord

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_pause_at_a_checkpoint_then_resume_without_losing_or_repeating_a_step(
    celery_worker_thread, engine_speed, make_actor
) -> None:
    engine_speed(10.0)  # about 0.7 s a step: the pause lands mid-run
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {make_actor('acme').token}")
    r = c.post(
        "/api/v1/jobs",
        {"spec": make_spec(trainer={"total_steps": 12})},
        format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )
    job_id = r.json()["id"]
    wait_for(lambda: Job.objects.get(pk=job_id).current_step >= 1, "the first step")

    assert c.post(f"/api/v1/jobs/{job_id}/pause").json()["status"] == "pausing"
    wait_for(lambda: Job.objects.get(pk=job_id).status == "paused", "the pause")
    job = Job.objects.get(pk=job_id)
    paused_at = job.current_step
    assert 1 <= paused_at < 12 and job.admitted_at is None
    assert JobCheckpoint.objects.filter(job=job, step=paused_at).exists()
    time.sleep(1.0)  # nothing runs while paused
    assert Job.objects.get(pk=job_id).current_step == paused_at

    assert c.post(f"/api/v1/jobs/{job_id}/resume").json()["status"] == "queued"
    wait_for(lambda: Job.objects.get(pk=job_id).status == "succeeded", "the resumed job to finish")
    steps = list(JobMetrics.objects.filter(job_id=job_id).order_by("step").values_list("step", flat=True))
    assert steps == list(range(1, 13))
    job = Job.objects.get(pk=job_id)
    assert job.attempt == 2 and job.gpu_seconds > 0
    assert UsageRecord.objects.filter(job=job).count() >= 12
