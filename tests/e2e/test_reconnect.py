"""The job page keeps itself live across a server restart: the stream drops, the page says it
is reconnecting, and once the server is back it resumes by itself with the steps that ran
meanwhile, no reload needed."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import off_loop
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from tests.e2e.test_job_page import wait_progress_above
from tests.engine.builders import make_spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _submit(username: str, steps: int) -> str:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.get(username=username))
    r = client.post(
        "/api/v1/jobs",
        {"name": "e2e-reconnect", "spec": make_spec(trainer={"total_steps": steps})},
        format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )
    assert r.status_code == 201, r.content
    return str(r.json()["id"])


def progress(page: Any) -> int:
    return int(page.get_by_test_id("job-progress").get_attribute("aria-valuenow") or 0)


def test_the_job_page_reconnects_by_itself_after_a_server_restart(browser, app_server, engine_speed) -> None:
    engine_speed(10.0)  # about 0.7 s a step: the job runs on through the restart
    make_member("alice", "acme")
    page, errors = sign_in(browser, app_server.url, "alice")
    job_id = off_loop(lambda: _submit("alice", 60))
    page.goto(f"{app_server.url}/jobs/{job_id}")
    indicator = "[data-testid=live-indicator][data-state={}]"
    page.wait_for_selector(indicator.format("live"), timeout=30_000)
    wait_progress_above(page, 1)

    app_server.stop()
    page.wait_for_selector(indicator.format("reconnecting"), timeout=15_000)
    page.wait_for_timeout(1500)  # the engine and worker go on meanwhile
    seen_before = progress(page)

    app_server.start()
    page.wait_for_selector(indicator.format("live"), timeout=30_000)  # the page's own back-off: <= 10 s
    wait_progress_above(page, seen_before + 2)  # the steps that ran while it was down, then new ones
    page.screenshot(path=str(ARTIFACTS / "job-page-after-restart.png"), full_page=True)
    # Requests refused while the server was down are logged by Chromium itself; nothing else.
    assert not [e for e in real_errors(errors) if "ERR_CONNECTION_REFUSED" not in e and "WebSocket" not in e]
