"""Deleting a job, as a tenant sees it: DELETE /api/v1/jobs/<id> takes an ended job with its
checkpoints (rows and files), samples, logs, events and metrics, keeps its usage in the ledger
and leaves an audit row; a job that has not ended, or another tenant's, is refused. A tenant's
retention setting deletes its old ended jobs the same way."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import AuditLog, Quota
from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.jobs import tasks
from webapp.jobs.models import Job, JobCheckpoint, JobEvent, JobMetrics, JobStatus, UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def submit(c: APIClient, spec: dict[str, Any]) -> str:
    r = c.post("/api/v1/jobs", {"spec": spec}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    return str(r.json()["id"])


def ended(job_id: str, status: str, *, days_ago: float = 0.0) -> None:
    Job.objects.filter(pk=job_id).update(status=status, finished_at=timezone.now() - timedelta(days=days_ago))


@pytest.fixture()
def real_engine(tmp_path: Path, tiny_policy_cache: Path) -> Iterator[Path]:
    """The engine in real mode, its checkpoints under a folder of this test's own (the warmed-up
    start policy is the session's: building it is most of a tiny job's time)."""
    names = ("ENGINE_MODE", "ENGINE_CLUSTER", "ENGINE_REAL_CACHE_DIR", "ENGINE_REAL_CHECKPOINT_DIR")
    before = {n: getattr(settings, n) for n in names}
    settings.ENGINE_MODE = "real"
    settings.ENGINE_CLUSTER = {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"}
    settings.ENGINE_REAL_CACHE_DIR = str(tiny_policy_cache)
    settings.ENGINE_REAL_CHECKPOINT_DIR = str(tmp_path / "checkpoints")
    engine_gateway.reset_engine_host()
    yield tmp_path / "checkpoints"
    for name, value in before.items():
        setattr(settings, name, value)
    engine_gateway.reset_engine_host()


@pytest.mark.slow
def test_deleting_a_trained_job_removes_it_and_its_checkpoint_files_and_keeps_the_ledger(
    celery_worker_thread: Any, real_engine: Path, make_actor: Any
) -> None:
    actor = make_actor("acme")
    Quota.objects.filter(tenant=actor.tenant).update(guaranteed_gpus={"cpu": 2})
    c = client_for(actor.token)
    presets = {p["name"]: p["spec"] for p in c.get("/api/v1/presets").json()["results"]}
    spec = {**presets["math-grpo"], "data": {"train_batch_size": 8}, "trainer": {"total_steps": 2}}
    job_id = submit(c, spec)
    running = c.delete(f"/api/v1/jobs/{job_id}")
    assert running.status_code == 409, running.content
    deadline = time.monotonic() + 600  # a shared, loaded machine: the warm-up alone can take minutes
    while Job.objects.get(pk=job_id).status not in ("succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.5)
    job = Job.objects.get(pk=job_id)
    assert job.status == "succeeded", job.status_reason
    folder = real_engine / job_id
    assert sorted(p.name for p in folder.glob("step-*")) == ["step-000001", "step-000002"]
    assert c.get(f"/api/v1/jobs/{job_id}/samples").json()["results"]
    checkpoint_rows = JobCheckpoint.objects.filter(job_id=job_id).count()
    assert checkpoint_rows >= 1 and JobMetrics.objects.filter(job_id=job_id).exists()
    usage_before = c.get("/api/v1/usage").json()
    assert usage_before["gpu_hours"] > 0

    r = c.delete(f"/api/v1/jobs/{job_id}")

    assert r.status_code == 204, r.content
    assert not folder.exists()
    assert not Job.objects.filter(pk=job_id).exists()
    for model in (JobCheckpoint, JobEvent, JobMetrics):
        assert not model.objects.filter(job_id=job_id).exists(), model
    ledger = UsageRecord.objects.filter(job_uuid=job_id)
    assert ledger.exists() and not ledger.filter(job__isnull=False).exists()
    usage_after = c.get("/api/v1/usage").json()
    assert usage_after["gpu_hours"] == usage_before["gpu_hours"]
    assert usage_after["by_device_type"] == usage_before["by_device_type"]
    [row] = usage_after["by_job"]
    assert (row["job"], row["name"], row["deleted"]) == (job_id, job.name, True)
    audit = AuditLog.objects.get(action="job.delete", target=job_id)
    assert audit.tenant == actor.tenant and audit.actor == actor.user
    assert audit.data["name"] == job.name and audit.data["reason"] == "request"
    assert audit.data["checkpoint_files"] > 0 and audit.data["checkpoints"] == checkpoint_rows
    assert c.get(f"/api/v1/jobs/{job_id}").status_code == 404
    assert c.delete(f"/api/v1/jobs/{job_id}").status_code == 404


def test_a_job_that_has_not_ended_is_refused_with_the_fix(make_actor: Any) -> None:
    c = client_for(make_actor("acme").token)
    job_id = submit(c, make_spec())
    for status in (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.PAUSED):
        Job.objects.filter(pk=job_id).update(status=status)
        r = c.delete(f"/api/v1/jobs/{job_id}")
        assert r.status_code == 409, r.content
        error = r.json()["error"]
        assert error["code"] == "invalid_state" and "cancel it first" in error["message"]
        assert error["details"] == [
            {"field": "status", "message": f"is {status}; must be succeeded, failed or cancelled"}
        ]
    assert Job.objects.filter(pk=job_id).exists()
    assert not AuditLog.objects.filter(action="job.delete").exists()
    ended(job_id, JobStatus.CANCELLED)  # what the cancel the message names leads to
    assert c.delete(f"/api/v1/jobs/{job_id}").status_code == 204


def test_only_the_jobs_own_tenant_with_write_scope_can_delete_it(make_actor: Any) -> None:
    owner = make_actor("acme")
    c = client_for(owner.token)
    job_id = submit(c, make_spec())
    ended(job_id, JobStatus.FAILED)
    other = client_for(make_actor("globex").token)
    assert other.delete(f"/api/v1/jobs/{job_id}").status_code == 404
    reader = make_actor("initech", scopes=("jobs:read",))
    assert client_for(reader.token).delete(f"/api/v1/jobs/{job_id}").status_code in (403, 404)
    assert Job.objects.filter(pk=job_id).exists()
    assert c.delete(f"/api/v1/jobs/{job_id}").status_code == 204


def test_retention_deletes_only_that_tenants_old_ended_jobs(make_actor: Any) -> None:
    keeper, expiring = make_actor("acme"), make_actor("globex")
    expiring.tenant.job_retention_days = 7
    expiring.tenant.save(update_fields=["job_retention_days"])
    ka, ex = client_for(keeper.token), client_for(expiring.token)
    kept_forever = submit(ka, make_spec())
    ended(kept_forever, JobStatus.SUCCEEDED, days_ago=30)
    old_ended = {submit(ex, make_spec()) for _ in range(2)}
    for job_id, status in zip(sorted(old_ended), (JobStatus.SUCCEEDED, JobStatus.CANCELLED), strict=True):
        ended(job_id, status, days_ago=8)
    recent = submit(ex, make_spec())
    ended(recent, JobStatus.FAILED, days_ago=6)
    old_queued = submit(ex, make_spec())
    Job.objects.filter(pk=old_queued).update(created_at=timezone.now() - timedelta(days=30))

    assert tasks.retention_sweep() == 2

    left = set(Job.objects.values_list("pk", flat=True))
    assert {str(pk) for pk in left} == {kept_forever, recent, old_queued}
    audits = AuditLog.objects.filter(action="job.delete")
    assert {a.target for a in audits} == old_ended
    assert all(a.actor is None and a.data["reason"] == "retention: 7 days" for a in audits)
    assert tasks.retention_sweep() == 0
    assert "job-retention" in settings.CELERY_BEAT_SCHEDULE


def test_the_retention_is_set_in_the_admin_and_audited(make_actor: Any, admin_user: Any) -> None:
    from django.test import Client

    from tests.web.test_django_admin import form_of

    actor = make_actor("acme")
    c = Client()
    c.force_login(admin_user)
    url = f"/admin/tenants/tenant/{actor.tenant.pk}/change/"
    form = form_of(c, url)
    assert form["job_retention_days"] == ""  # jobs are kept until deleted
    form["job_retention_days"] = "30"
    response = c.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    actor.tenant.refresh_from_db()
    assert actor.tenant.job_retention_days == 30
    entry = AuditLog.objects.get(action="tenant.retention", actor=admin_user)
    assert entry.data == {"job_retention_days": {"from": None, "to": 30}}
