"""The rest of /api/v1 as a client sees it: edit, pause, resume and clone a job; its logs,
checkpoints, metrics (downsampled, CSV) and event stream; the tenant's quota, usage and API
keys; and the admin's view of tenants, the queue and the audit log."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from tenants.models import AuditLog, Quota
from tests.engine.builders import make_spec
from webapp.jobs import admission, journal
from webapp.jobs.models import EventKind, Job, JobCheckpoint, JobEvent, JobMetrics, JobStatus, UsageRecord
from webapp.jobs.services import engine_events, lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def new_job(c: APIClient, **spec: Any) -> dict[str, Any]:
    r = c.post("/api/v1/jobs", {"spec": make_spec(**spec)}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    return r.json()  # type: ignore[no-any-return]


def test_patch_renames_retags_and_caps_priority(make_actor) -> None:
    actor = make_actor("acme")
    c = client_for(actor.token)
    job = new_job(c)
    r = c.patch(f"/api/v1/jobs/{job['id']}", {"name": "renamed", "tags": ["gsm8k", "ablation"]}, format="json")
    assert r.status_code == 200 and r.json()["name"] == "renamed" and r.json()["tags"] == ["gsm8k", "ablation"]
    assert c.get("/api/v1/jobs?tag=ablation").json()["results"][0]["id"] == job["id"]
    assert c.get("/api/v1/jobs?tag=other").json()["results"] == []
    too_high = c.patch(f"/api/v1/jobs/{job['id']}", {"priority": 5}, format="json")
    assert too_high.status_code == 422
    assert too_high.json()["error"]["details"] == [
        {"field": "priority", "message": "must be <= 1 (quota priority_limit)"}
    ]
    Quota.objects.filter(tenant=actor.tenant).update(priority_limit=10)
    assert c.patch(f"/api/v1/jobs/{job['id']}", {"priority": 5}, format="json").json()["priority"] == 5


def test_pause_a_queued_job_resume_it_and_refuse_nonsense(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    job = new_job(c)
    paused = c.post(f"/api/v1/jobs/{job['id']}/pause")
    assert paused.status_code == 200 and paused.json()["status"] == "paused"  # never admitted: at once
    again = c.post(f"/api/v1/jobs/{job['id']}/pause")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"
    resumed = c.post(f"/api/v1/jobs/{job['id']}/resume")
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"
    assert c.post(f"/api/v1/jobs/{job['id']}/resume").status_code == 409


def test_clone_from_a_checkpoint_with_overrides(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    source = new_job(c, trainer={"total_steps": 10})
    for step in (5, 10):
        JobCheckpoint.objects.create(job_id=source["id"], step=step)
    r = c.post(f"/api/v1/jobs/{source['id']}/clone", {"overrides": {"rollout": {"n": 8}}}, format="json")
    assert r.status_code == 201, r.content
    clone = r.json()
    assert clone["cloned_from"] == source["id"] and clone["name"] == "t (clone)"
    # Step 10 ends the run: the latest checkpoint that leaves work is step 5.
    assert clone["spec"]["trainer"] == {"total_steps": 10, "start_step": 5}
    assert clone["progress"] == {"step": 5, "total_steps": 10}
    longer = c.post(
        f"/api/v1/jobs/{source['id']}/clone", {"overrides": {"trainer": {"total_steps": 20}}}, format="json"
    )
    assert longer.json()["resolved_spec"]["trainer"]["start_step"] == 10  # train on from the end
    assert clone["resolved_spec"]["rollout"]["n"] == 8

    scratch = c.post(f"/api/v1/jobs/{source['id']}/clone", {"checkpoint_step": 0}, format="json").json()
    assert scratch["progress"] == {"step": 0, "total_steps": 10} and "start_step" not in scratch["spec"]["trainer"]

    missing = c.post(f"/api/v1/jobs/{source['id']}/clone", {"checkpoint_step": 7}, format="json")
    assert missing.status_code == 400
    assert missing.json()["error"]["details"][0] == {
        "field": "checkpoint_step",
        "message": "must be one of [5, 10] (or 0: from scratch)",
    }
    bad = c.post(f"/api/v1/jobs/{source['id']}/clone", {"overrides": {"rollout": {"n": 0}}}, format="json")
    assert bad.status_code == 400
    assert {"field": "overrides.rollout.n", "message": "must be >= 1, got 0"} in bad.json()["error"]["details"]


def test_logs_checkpoints_metrics_downsampled_and_csv(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    job = Job.objects.get(pk=new_job(c, trainer={"total_steps": 500})["id"])
    for step in range(1, 501):
        JobMetrics.objects.create(job=job, step=step, values={"reward/mean": step % 7, "timing_s/step": 2.0})
    JobCheckpoint.objects.create(job=job, step=250)
    journal.append_event(job, EventKind.LOG, {"level": "warning", "message": "slow tail"})

    logs = c.get(f"/api/v1/jobs/{job.pk}/logs").json()
    assert [line["message"] for line in logs["results"]] == ["slow tail"]
    assert c.get(f"/api/v1/jobs/{job.pk}/logs?after={logs['next_after']}").json()["results"] == []
    assert [cp["step"] for cp in c.get(f"/api/v1/jobs/{job.pk}/checkpoints").json()["results"]] == [250]

    full = c.get(f"/api/v1/jobs/{job.pk}/metrics").json()["series"]
    assert len(full["reward/mean"]) == 500
    small = c.get(f"/api/v1/jobs/{job.pk}/metrics?max_points=50&names=reward/mean").json()["series"]
    assert set(small) == {"reward/mean"} and len(small["reward/mean"]) == 50
    assert small["reward/mean"][0] == [1.0, 1.0] and small["reward/mean"][-1] == [500.0, 500 % 7]
    assert max(v for _, v in small["reward/mean"]) == 6  # the peaks survive downsampling
    bad = c.get(f"/api/v1/jobs/{job.pk}/metrics?max_points=1")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["field"] == "max_points"

    csv = c.get(f"/api/v1/jobs/{job.pk}/metrics?format=csv")
    assert csv.status_code == 200 and csv["Content-Type"].startswith("text/csv")
    lines = csv.content.decode().splitlines()
    assert lines[0] == "step,reward/mean,timing_s/step" and lines[1] == "1,1.0,2.0" and len(lines) == 501
    bad_csv = c.get(f"/api/v1/jobs/{job.pk}/metrics?format=csv&max_points=1")  # an error is JSON, always
    assert bad_csv.status_code == 400 and bad_csv["Content-Type"] == "application/json"
    assert bad_csv.json()["error"]["details"][0]["field"] == "max_points"


def test_event_stream_replays_after_last_event_id_and_ends_with_the_job(make_actor) -> None:
    c = client_for(make_actor("acme").token)
    job_id = new_job(c)["id"]
    lifecycle.job_transition(job_id=job_id, to=JobStatus.CANCELLED, reason="cancelled by test")
    r = c.get(f"/api/v1/jobs/{job_id}/events/stream", HTTP_ACCEPT="text/event-stream", HTTP_LAST_EVENT_ID="1")
    assert r.status_code == 200 and r["Content-Type"] == "text/event-stream"
    body = b"".join(r).decode()
    ids = [int(line[4:]) for line in body.splitlines() if line.startswith("id: ")]
    assert ids == list(range(2, Job.objects.get(pk=job_id).last_event_seq + 1))
    assert '"status": "cancelled"' in body and body.rstrip().endswith("event: end\ndata: {}")


def test_quota_and_usage_report_what_the_tenant_holds_and_used(make_actor) -> None:
    actor = make_actor("acme")
    c = client_for(actor.token)
    job = Job.objects.get(pk=new_job(c, resources={"num_gpus": 2})["id"])
    admission.admission_tick()
    UsageRecord.objects.create(job=job, tenant=actor.tenant, device_type="h100", gpu_seconds=7200.0)
    q = c.get("/api/v1/quota").json()
    assert q["limits"]["guaranteed_gpus"] == {"h100": 4} and q["limits"]["max_gpus_per_job"] == 8
    assert q["usage"] == {
        "gpus_held": 2,
        "borrowed_gpus": 0,
        "running_jobs": 1,
        "queued_jobs": 0,
        "gpu_hours_this_month": 2.0,
    }
    usage = c.get("/api/v1/usage").json()
    assert usage["gpu_hours"] == 2.0 and usage["by_device_type"] == {"h100": 2.0}
    assert usage["by_job"][0]["job"] == str(job.pk)
    bad = c.get("/api/v1/usage?since=yesterday")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["field"] == "since"


def test_api_keys_are_shown_once_scoped_and_revocable(make_actor) -> None:
    owner = make_actor("acme")
    c = client_for(owner.token)
    r = c.post("/api/v1/api-keys", {"name": "ci", "scopes": ["jobs:read"], "expires_in_days": 7}, format="json")
    assert r.status_code == 201
    created = r.json()
    assert created["token"].startswith("jrl_") and created["scopes"] == ["jobs:read"]
    listed = c.get("/api/v1/api-keys").json()["results"]
    assert {k["key_id"] for k in listed} >= {created["key_id"]}
    assert all("token" not in k and "secret_hash" not in k for k in listed)

    read_only = client_for(created["token"])
    assert read_only.get("/api/v1/jobs").status_code == 200
    escalate = read_only.post("/api/v1/api-keys", {"name": "x", "scopes": ["jobs:write"]}, format="json")
    assert escalate.status_code == 403  # no write scope: cannot mint keys at all
    bad = c.post("/api/v1/api-keys", {"name": "x", "scopes": ["root"]}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["field"] == "scopes[0]"

    assert c.delete(f"/api/v1/api-keys/{created['key_id']}").status_code == 204
    assert read_only.get("/api/v1/jobs").status_code == 401
    assert AuditLog.objects.filter(action="api_token.revoke", target=created["key_id"]).exists()


def test_admin_sees_every_tenant_edits_quotas_with_audit_and_sees_the_queue(make_actor, admin_user) -> None:
    a, b = make_actor("acme"), make_actor("globex")
    assert client_for(a.token).get("/api/v1/admin/tenants").status_code == 403
    admin = APIClient()
    admin.force_login(admin_user)
    tenants = admin.get("/api/v1/admin/tenants").json()["results"]
    assert [t["tenant"] for t in tenants] == ["acme", "globex"]

    bad = admin.patch(
        "/api/v1/admin/tenants/acme/quota", {"max_running_jobs": -1, "guaranteed_gpus": {"h100": 99}}, format="json"
    )
    assert bad.status_code == 400
    fields = {d["field"] for d in bad.json()["error"]["details"]}
    assert fields == {"max_running_jobs", "guaranteed_gpus.h100"}
    unknown = admin.patch("/api/v1/admin/tenants/acme/quota", {"gpus": 3}, format="json")
    [detail] = unknown.json()["error"]["details"]
    assert detail["field"] == "gpus" and detail["message"].startswith("unknown field; known fields: borrow_limit_gpus,")

    ok = admin.patch("/api/v1/admin/tenants/acme/quota", {"max_running_jobs": 0}, format="json")
    assert ok.status_code == 200 and ok.json()["limits"]["max_running_jobs"] == 0
    entry = AuditLog.objects.filter(action="quota.update").first()
    assert entry is not None and entry.data == {"max_running_jobs": {"from": 4, "to": 0}}
    audit = admin.get("/api/v1/admin/audit?tenant=acme").json()["results"]
    assert audit[0]["action"] == "quota.update" and audit[0]["actor"] == admin_user.username

    job = new_job(client_for(a.token))
    new_job(client_for(b.token))
    admission.admission_tick()
    queue = {q["id"]: q for q in admin.get("/api/v1/admin/queue").json()["results"]}
    assert queue[job["id"]]["reason"].startswith("quota: 0 jobs running, the limit is 0")
    cluster = admin.get("/api/v1/admin/cluster").json()
    assert cluster["num_gpus"] == 8 and cluster["by_tenant"]["globex"]["gpus"] == 2
    assert admin.get("/api/v1/admin/tenants/nope/quota").status_code == 404


def test_engine_usage_and_checkpoints_are_ledgered_exactly_once(make_actor, engine_speed) -> None:
    """Through the real in-process engine: every device-second it reports lands in the ledger
    once (the pump may deliver twice), and checkpoints follow trainer.save_freq."""
    from webapp.jobs.tasks import dispatch_job

    c = client_for(make_actor("acme").token)
    job_id = new_job(c, trainer={"total_steps": 4, "save_freq": 2})["id"]
    admission.admission_tick()
    assert dispatch_job(job_id) == "dispatched"  # speed inf: the engine runs it to the end
    engine_events.engine_events_pump()
    from webapp.jobs.models import EngineCursor

    EngineCursor.objects.update(cursor=0)  # a crashed pump re-reads everything
    engine_events.engine_events_pump()
    job = Job.objects.get(pk=job_id)
    assert job.status == JobStatus.SUCCEEDED and job.admitted_at is None
    from webapp import engine_gateway

    _, events, _ = engine_gateway.pull_events(cursor=0, limit=10_000)
    mine = [e for e in events if e.pipeline_id == job_id]
    reported = sum(e.data["metrics"]["usage/device_seconds"] for e in mine if e.kind.value == "metrics")
    reported += sum(e.data.get("device_seconds", 0.0) for e in mine if e.kind.value == "status")
    ledger = sum(UsageRecord.objects.filter(job=job).values_list("gpu_seconds", flat=True))
    assert reported > 0 and ledger == pytest.approx(reported) and job.gpu_seconds == pytest.approx(reported)
    assert list(JobCheckpoint.objects.filter(job=job).values_list("step", flat=True)) == [2, 4]
    assert JobEvent.objects.filter(job=job, kind=EventKind.METRICS).count() == 4


def test_too_many_submits_get_429_with_retry_after(make_actor, monkeypatch) -> None:
    from webapp.api.throttling import JobCreateRateThrottle

    monkeypatch.setattr(JobCreateRateThrottle, "THROTTLE_RATES", {"job_create": "2/min"})
    c = client_for(make_actor("acme").token)
    new_job(c)
    new_job(c)
    r = c.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 429 and r.json()["error"]["code"] == "throttled"
    assert 1 <= int(r["Retry-After"]) <= 61
    assert c.get("/api/v1/jobs").status_code == 200  # reading is limited separately
    other = client_for(make_actor("globex").token)
    new_job(other)  # another caller has its own budget


@pytest.mark.slow
def test_event_stream_is_live_over_a_real_server(make_actor, live_server_url, engine_speed) -> None:
    """Frames arrive while the job runs, not when it ends (ASGI streams an async iterator)."""
    import httpx

    engine_speed(1.0)  # real time: the job is still starting when the first frames arrive
    actor = make_actor("acme")
    job_id = new_job(client_for(actor.token))["id"]
    headers = {"Authorization": f"Bearer {actor.token}", "Accept": "text/event-stream"}
    with httpx.stream("GET", f"{live_server_url}/api/v1/jobs/{job_id}/events/stream", headers=headers, timeout=10) as r:
        assert r.status_code == 200
        ids = []
        for line in r.iter_lines():
            if line.startswith("id: "):
                ids.append(int(line[4:]))
            if len(ids) >= 2:
                break
    assert ids[:2] == [1, 2]
    assert Job.objects.get(pk=job_id).status not in ("succeeded", "failed", "cancelled")


def test_admin_creates_tenants_manages_members_and_reads_all_usage(make_actor, admin_user) -> None:
    from django.contrib.auth import get_user_model

    from tenants.models import ApiToken, Membership

    a = make_actor("acme")
    admin = APIClient()
    admin.force_login(admin_user)
    r = admin.post(
        "/api/v1/admin/tenants",
        {"slug": "initech", "name": "Initech", "quota": {"guaranteed_gpus": {"h100": 2}}},
        format="json",
    )
    assert r.status_code == 201 and r.json()["limits"]["guaranteed_gpus"] == {"h100": 2}
    dup = admin.post("/api/v1/admin/tenants", {"slug": "initech", "name": "again"}, format="json")
    assert dup.status_code == 400 and dup.json()["error"]["details"][0]["field"] == "slug"

    bob = get_user_model().objects.create_user(username="bob", password="pw-bob-bob-bob")
    put = admin.put("/api/v1/admin/tenants/initech/members/bob", {"role": "member"}, format="json")
    assert put.status_code == 200 and Membership.objects.get(user=bob).role == "member"
    assert admin.put("/api/v1/admin/tenants/initech/members/bob", {"role": "god"}, format="json").status_code == 400

    # Removing a member revokes their tokens for that tenant.
    assert admin.delete(f"/api/v1/admin/tenants/acme/members/{a.user.username}").status_code == 204
    assert ApiToken.objects.get(tenant=a.tenant).revoked_at is not None
    assert client_for(a.token).get("/api/v1/jobs").status_code == 401
    actions = set(AuditLog.objects.values_list("action", flat=True))
    assert {"tenant.create", "membership.set", "membership.delete"} <= actions

    usage = admin.get("/api/v1/admin/usage").json()
    assert usage["gpu_hours_by_tenant"] == {}


def test_cluster_timeline_names_only_the_callers_jobs(make_actor, engine_speed) -> None:
    from webapp.jobs.tasks import dispatch_job

    a, b = make_actor("acme"), make_actor("globex")
    mine = new_job(client_for(a.token), trainer={"total_steps": 2})["id"]
    theirs = new_job(client_for(b.token), trainer={"total_steps": 2})["id"]
    admission.admission_tick()
    dispatch_job(mine)
    dispatch_job(theirs)  # speed inf: both ran to the end on the shared cluster
    r = client_for(a.token).get("/api/v1/cluster/timeline?window_s=86400")
    assert r.status_code == 200
    body = r.json()
    assert body["num_devices"] == 8 and body["device_type"] == "h100"
    jobs = {s["job"] for s in body["spans"]}
    assert jobs == {mine, None}  # globex's work is there, unnamed
    assert theirs not in r.content.decode()
    kinds = {s["kind"] for s in body["spans"] if s["job"] == mine}
    assert {"train", "weight_sync"} <= kinds and all(s["end_s"] >= s["start_s"] for s in body["spans"])
    bad = client_for(a.token).get("/api/v1/cluster/timeline?window_s=0")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["field"] == "window_s"
