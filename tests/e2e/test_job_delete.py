"""Deleting a job from its page in a real headless Chromium against the live server: no Delete
button while the job runs; once it is cancelled, Delete asks first (keeping it is a choice),
then deletes it and returns to the jobs list, where it no longer shows."""

from __future__ import annotations

from typing import Any

import pytest

from tenants.models import AuditLog
from tests.e2e.helpers import off_loop
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from tests.e2e.test_job_page import submit_job, wait_status
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_delete_an_ended_job_from_its_page(browser: Any, live_server_url: str, engine_speed: Any) -> None:
    engine_speed(10.0)
    make_member("alice", "acme")
    base = live_server_url
    page, errors = sign_in(browser, base, "alice")
    job_id = submit_job("alice", "e2e-delete-me")

    page.goto(f"{base}/jobs/{job_id}")
    page.get_by_role("heading", name="e2e-delete-me").wait_for()
    page.get_by_test_id("cancel-job").wait_for()
    assert page.get_by_test_id("delete-job").count() == 0  # not ended: nothing to delete yet
    page.get_by_test_id("cancel-job").click()
    wait_status(page, "cancelled")

    page.get_by_test_id("delete-job").click()
    dialog = page.get_by_test_id("delete-dialog")
    dialog.wait_for()
    assert "usage stays" in dialog.inner_text()
    dialog.get_by_role("button", name="Keep it").click()
    dialog.wait_for(state="hidden")
    assert off_loop(lambda: Job.objects.filter(pk=job_id).exists())

    page.get_by_test_id("delete-job").click()
    page.get_by_test_id("delete-confirm").click()
    page.wait_for_url(f"{base}/")
    page.get_by_test_id("new-job-button").wait_for()
    assert page.get_by_text("e2e-delete-me").count() == 0
    assert not off_loop(lambda: Job.objects.filter(pk=job_id).exists())
    assert off_loop(lambda: AuditLog.objects.filter(action="job.delete", target=job_id).count()) == 1
    assert real_errors(errors) == []
