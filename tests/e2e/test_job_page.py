"""The job page in a real headless Chromium against the live server: pause a running job and
resume it, see the checkpoint the pause recorded, read a log line, download the metrics as
CSV, then clone from the checkpoint (an invalid override first, shown inline) and land on
the new job's page."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.test import APIClient

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import check_widths, off_loop
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from tests.engine.builders import make_spec
from webapp.jobs import journal
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOB_URL = re.compile(r".*/jobs/[0-9a-f-]{36}$")


def wait_status(page: Any, status: str, timeout_ms: int = 30_000) -> None:
    page.wait_for_function(
        "s => document.querySelector('[data-testid=job-status]')?.textContent.trim() === s",
        arg=status,
        timeout=timeout_ms,
    )


def wait_progress_above(page: Any, step: int, timeout_ms: int = 30_000) -> None:
    page.wait_for_function(
        "n => Number(document.querySelector('[data-testid=job-progress]')?.getAttribute('aria-valuenow')) > n",
        arg=step,
        timeout=timeout_ms,
    )


def submit_job(username: str, name: str) -> str:
    return off_loop(lambda: _submit_job(username, name))


def _submit_job(username: str, name: str) -> str:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.get(username=username))
    r = client.post(
        "/api/v1/jobs",
        {"name": name, "spec": make_spec(trainer={"total_steps": 12})},
        format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )
    assert r.status_code == 201, r.content
    return str(r.json()["id"])


def add_log_line(job_id: str, message: str) -> None:
    def append() -> None:
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job_id)
            journal.append_event(job, "log", {"level": "info", "message": message})

    off_loop(append)


def test_pause_resume_checkpoints_logs_and_clone(browser, live_server_url, engine_speed) -> None:
    engine_speed(10.0)  # about 0.7 s a step: 12 steps take ~10 s, so the pause lands mid-run
    make_member("alice", "acme")
    base = live_server_url
    page, errors = sign_in(browser, base, "alice")
    job_id = submit_job("alice", "e2e-job-page")

    page.goto(f"{base}/jobs/{job_id}")
    page.get_by_role("heading", name="e2e-job-page").wait_for()
    facts = page.get_by_test_id("job-facts")
    assert re.fullmatch(r"2 (\u00d7 \S+|GPUs)", facts.get_by_test_id("job-gpus").inner_text())
    assert "GPU-h" in facts.get_by_test_id("job-gpu-hours").inner_text()
    page.get_by_test_id("samples-empty").wait_for()  # a simulated job has no samples
    page.get_by_test_id("checkpoints-empty").wait_for()

    # Pause after the first step: pausing, then paused at a step boundary, which is checkpointed.
    wait_progress_above(page, 0)
    page.get_by_test_id("pause-job").click()
    wait_status(page, "paused")
    paused_at = off_loop(lambda: Job.objects.get(pk=job_id).current_step)  # the pause's checkpoint
    assert 1 <= paused_at < 12
    wait_progress_above(page, paused_at - 1)
    page.locator(f"[data-testid=checkpoint-row][data-step='{paused_at}']").wait_for(timeout=15_000)
    assert page.get_by_test_id("pause-job").count() == 0

    # A log line written now shows in the followed logs panel (polled every 2 s).
    add_log_line(job_id, "hello from the e2e test")
    page.get_by_test_id("log-line").filter(has_text="hello from the e2e test").wait_for(timeout=10_000)

    # Resume: queued again, then it trains on from the checkpoint.
    page.get_by_test_id("resume-job").click()
    wait_progress_above(page, paused_at, timeout_ms=40_000)
    assert page.get_by_test_id("job-status").inner_text().strip() in {"running", "succeeded"}
    page.screenshot(path=str(ARTIFACTS / "job-page.png"), full_page=True)
    check_widths(page, "job", ARTIFACTS)

    # The metrics as CSV, fetched with the tenant header and saved.
    with page.expect_download() as download:
        page.get_by_test_id("metrics-csv").click()
    assert download.value.suggested_filename == f"{job_id}-metrics.csv"
    with open(download.value.path(), encoding="utf-8") as f:
        assert f.readline().startswith("step,")
    assert "format=csv" in page.get_by_test_id("metrics-csv").get_attribute("href")

    # Clone from the checkpoint: a bad override is refused inline with its field, then it works.
    page.locator(f"[data-testid=clone-from-checkpoint][data-step='{paused_at}']").click()
    dialog = page.get_by_test_id("clone-dialog")
    dialog.wait_for()
    assert dialog.get_by_test_id("clone-checkpoint").input_value() == str(paused_at)
    dialog.get_by_test_id("clone-name").fill("e2e-clone")
    dialog.get_by_test_id("clone-overrides").fill('{"rollout": {"n": 0}}')
    dialog.get_by_test_id("clone-submit").click()
    detail = dialog.get_by_test_id("error-detail").first
    detail.wait_for()
    assert detail.inner_text() == "overrides.rollout.n: must be >= 1, got 0"
    page.screenshot(path=str(ARTIFACTS / "job-page-clone-error.png"))
    dialog.get_by_test_id("clone-overrides").fill("")
    dialog.get_by_test_id("clone-submit").click()
    page.wait_for_url(lambda url: JOB_URL.match(url) is not None and not url.endswith(job_id))
    clone_id = page.url.rsplit("/", 1)[1]
    page.get_by_role("heading", name="e2e-clone").wait_for()
    assert page.get_by_test_id("cloned-from").get_attribute("href") == f"/jobs/{job_id}"
    clone = Job.objects.get(pk=clone_id)
    assert str(clone.cloned_from_id) == job_id and clone.start_step == paused_at

    # Leave nothing running behind: cancel the clone from its page.
    page.get_by_test_id("cancel-job").click()
    wait_status(page, "cancelled")
    assert real_errors(errors) == []
