"""The job page while its stream is live: the step and the curves move with the stream alone,
with no polling of the job (the stream writes into the page's query cache); and the router
keeps the page's URL, so leaving for the jobs list and coming back shows the job at once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import off_loop
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from tests.e2e.test_job_page import wait_progress_above, wait_status
from tests.e2e.test_reconnect import _submit, progress

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The first chart of the page, whichever metric the simulated job reports first.
CHART = "figure.chart[data-points]"
# The job was polled every 3 s before the stream fed the cache; this many steps (~0.7 s
# each) span more than two of those intervals.
STEPS_WATCHED = 10


def chart_points(page: Any) -> int:
    return int(page.locator(CHART).first.get_attribute("data-points") or 0)


def test_a_live_job_page_follows_the_stream_without_polling_the_job(browser, live_server_url, engine_speed) -> None:
    engine_speed(10.0)  # about 0.7 s a step
    make_member("alice", "acme")
    base = live_server_url
    page, errors = sign_in(browser, base, "alice")
    job_id = off_loop(lambda: _submit("alice", 40))

    page.goto(f"{base}/jobs/{job_id}")
    page.wait_for_selector("[data-testid=live-indicator][data-state=live]", timeout=30_000)
    wait_status(page, "running")
    wait_progress_above(page, 1)
    page.wait_for_function(f"() => Number(document.querySelector('{CHART}')?.dataset.points) > 0")

    job_reads: list[str] = []
    job_url = f"/api/v1/jobs/{job_id}"
    page.on("request", lambda r: job_reads.append(r.url) if r.method == "GET" and r.url.endswith(job_url) else None)

    step, points = progress(page), chart_points(page)
    wait_progress_above(page, step + STEPS_WATCHED)

    assert page.get_by_test_id("job-status").inner_text().strip() == "running"  # no status event meanwhile
    assert chart_points(page) > points  # the curve grew from the stream
    assert job_reads == [], job_reads  # and the job was not polled
    page.screenshot(path=str(ARTIFACTS / "job-page-live-cache.png"), full_page=True)

    # A client-side round trip: the breadcrumb to the list, then back, with the URL kept.
    page.get_by_role("link", name="Jobs").first.click()
    page.wait_for_url(f"{base}/")
    page.locator(f"[data-testid=job-row][data-job-id='{job_id}']").wait_for()
    page.go_back()
    page.wait_for_url(f"{base}/jobs/{job_id}")
    page.get_by_test_id("job-status").wait_for()
    assert real_errors(errors) == []
