"""``jigsaw jobs delete`` and ``JigsawClient.delete_job`` against a live server: an ended job goes
once confirmed, a running one is refused with the fix, a deleted one is not found."""

from __future__ import annotations

import io
from typing import Any

import pytest

from jigsaw_client import ApiError, JigsawClient
from tenants.models import Quota
from tests.engine.builders import make_spec
from webapp.jobs.models import Job, JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def ended_job(client: JigsawClient) -> str:
    job_id = client.submit_job(make_spec(), name="to-delete")["id"]
    Job.objects.filter(pk=job_id).update(status=JobStatus.SUCCEEDED)
    return job_id


def test_delete_needs_a_confirmation_and_then_deletes(
    jigsaw: Any, live_server_url: str, actor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    Quota.objects.filter(tenant=actor.tenant).update(max_running_jobs=0)  # never reaches the engine
    with JigsawClient(live_server_url, actor.token) as client:
        job_id = ended_job(client)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: nothing to ask
    unconfirmed = jigsaw("jobs", "delete", job_id)
    assert unconfirmed.code == 2 and "pass --yes to confirm" in unconfirmed.err
    assert Job.objects.filter(pk=job_id).exists()

    done = jigsaw("jobs", "delete", job_id, "--yes")
    assert done.code == 0, done.err
    assert done.out.strip() == f"job {job_id}: deleted (its usage stays in the ledger)"
    assert not Job.objects.filter(pk=job_id).exists()

    again = jigsaw("jobs", "delete", job_id, "--yes")
    assert again.code == 1 and "HTTP 404" in again.err


def test_a_job_that_has_not_ended_is_refused_with_the_fix(jigsaw: Any, live_server_url: str, actor: Any) -> None:
    Quota.objects.filter(tenant=actor.tenant).update(max_running_jobs=0)  # it stays queued
    with JigsawClient(live_server_url, actor.token) as client:
        job_id = client.submit_job(make_spec())["id"]
        with pytest.raises(ApiError) as refused:
            client.delete_job(job_id)
    assert refused.value.status == 409 and refused.value.code == "invalid_state"
    shown = jigsaw("jobs", "delete", job_id, "-y")
    assert shown.code == 1
    assert "cancel it first" in shown.err and "(invalid_state, HTTP 409)" in shown.err
    assert "  status: is queued; must be succeeded, failed or cancelled" in shown.err
