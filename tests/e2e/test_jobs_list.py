"""The jobs list and the compare page in a real headless Chromium against the live server:
filter the list by status, select two finished jobs (one by keyboard), compare them and see
one line and one legend entry per job, for each metric picked."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from rest_framework.test import APIClient

from tests.e2e.charts import hover, readout
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import check_widths, off_loop
from tests.e2e.test_dashboard import PASSWORD, real_errors, sign_in
from tests.engine.builders import make_spec
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TERMINAL = {"succeeded", "failed", "cancelled"}


def api_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def submit(token: str, name: str) -> str:
    def post() -> str:
        r = api_client(token).post(
            "/api/v1/jobs",
            {"name": name, "spec": make_spec(trainer={"total_steps": 3})},
            format="json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )
        assert r.status_code == 201, r.content
        return str(r.json()["id"])

    return off_loop(post)


def cancel(token: str, job_id: str) -> None:
    def post() -> None:
        r = api_client(token).post(f"/api/v1/jobs/{job_id}/cancel")
        assert r.status_code in (200, 202, 409), r.content

    off_loop(post)


def wait_terminal(job_ids: list[str], timeout_s: float = 60.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        statuses = off_loop(lambda: dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "status")))
        statuses = {str(k): v for k, v in statuses.items()}
        if all(statuses.get(j) in TERMINAL for j in job_ids):
            return statuses
        assert time.monotonic() < deadline, f"jobs did not finish: {statuses}"
        time.sleep(0.3)


def test_filter_select_and_compare(browser, live_server_url, engine_speed, make_actor) -> None:
    engine_speed(40.0)  # a 3-step job finishes within a couple of seconds
    actor = make_actor("acme")
    actor.user.set_password(PASSWORD)
    off_loop(actor.user.save)
    base = live_server_url

    first = submit(actor.token, "cmp-alpha")
    second = submit(actor.token, "cmp-beta")
    third = submit(actor.token, "cmp-gamma")
    cancel(actor.token, third)
    statuses = wait_terminal([first, second, third])
    assert statuses[first] == statuses[second] == "succeeded", statuses
    succeeded = [j for j, s in statuses.items() if s == "succeeded"]

    page, errors = sign_in(browser, base, actor.user.username)
    rows = page.get_by_test_id("job-row")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=job-row]').length === 3")
    row = page.locator(f"[data-testid=job-row][data-job-id='{first}']")
    assert re.fullmatch(r"2 (\u00d7 \S+|GPUs)", row.get_by_test_id("job-gpus").inner_text())
    assert "GPU-h" in row.get_by_test_id("job-gpu-hours").inner_text()
    assert row.get_by_test_id("job-eta").inner_text().strip() == "ETA \u2014"  # finished: no ETA

    # Filter by status: only the succeeded jobs remain.
    page.get_by_test_id("status-filter-toggle").click()
    page.get_by_test_id("status-option-succeeded").check()
    page.wait_for_function(
        "n => { const r = [...document.querySelectorAll('[data-testid=job-row]')];"
        " return r.length === n && r.every(e => e.dataset.status === 'succeeded'); }",
        arg=len(succeeded),
    )
    page.get_by_test_id("status-filter-toggle").click()  # close the menu

    # The filters live in the URL: a reload keeps them.
    page.get_by_test_id("name-filter").fill("alpha")
    page.wait_for_url(re.compile(r".*/\?status=succeeded&name=alpha$"))
    page.reload()
    page.wait_for_function(
        "id => { const r = [...document.querySelectorAll('[data-testid=job-row]')];"
        " return r.length === 1 && r[0].dataset.jobId === id; }",
        arg=first,
    )
    assert page.get_by_test_id("name-filter").input_value() == "alpha"
    assert page.get_by_test_id("status-option-succeeded").is_checked()
    page.get_by_test_id("name-filter").fill("")
    page.wait_for_url(re.compile(r".*/\?status=succeeded$"))
    page.wait_for_function("n => document.querySelectorAll('[data-testid=job-row]').length === n", arg=len(succeeded))

    # Select two: one with the mouse, one from the keyboard.
    compare = page.get_by_test_id("compare-button")
    assert compare.is_disabled()
    page.locator(f"[data-testid=job-row][data-job-id='{first}'] [data-testid=job-select]").check()
    page.locator(f"[data-testid=job-row][data-job-id='{second}'] [data-testid=job-select]").focus()
    page.keyboard.press("Space")
    assert compare.inner_text().strip() == "Compare (2)"
    assert rows.count() == len(succeeded)
    page.screenshot(path=str(ARTIFACTS / "jobs-list.png"), full_page=True)
    check_widths(page, "jobs", ARTIFACTS)

    compare.click()
    page.wait_for_url(re.compile(r".*/compare\?jobs=.+"))
    assert set(page.url.split("jobs=", 1)[1].split(",")) == {first, second}
    score = "compare-chart-response_length_mean"
    page.locator(f"[data-testid={score}][data-drawn][data-lines='2']").wait_for()
    legend = page.get_by_test_id("compare-legend-item")
    assert legend.count() == 2
    assert {legend.nth(i).get_attribute("data-job-id") for i in range(2)} == {first, second}
    assert "cmp-alpha" in page.get_by_test_id("compare-legend").inner_text()
    # Both runs have the same spec, so their lines coincide: the cursor's read-out names both.
    hover(page, score, 0.5)
    assert re.fullmatch(r"step \d+: cmp-\w+ .+, cmp-\w+ .+", readout(page, score)), readout(page, score)

    # Filter to another metric: still one line per job.
    page.get_by_test_id("metric-filter").fill("throughput")
    throughput = "compare-chart-perf_throughput"
    page.locator(f"[data-testid={throughput}][data-drawn][data-lines='2']").wait_for()
    assert page.locator(f"[data-testid={score}]").count() == 0
    hover(page, throughput, 0.5)
    assert re.fullmatch(r"step \d+: cmp-\w+ .+, cmp-\w+ .+", readout(page, throughput)), readout(page, throughput)
    page.mouse.move(0, 0)
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    check_widths(page, "compare", ARTIFACTS)

    # A reload of /compare is served the app too.
    page.reload()
    page.locator(f"[data-testid={score}][data-drawn][data-lines='2']").wait_for()

    # Back to the list: still filtered.
    page.go_back()
    page.wait_for_url(re.compile(r".*/\?status=succeeded$"))
    page.wait_for_function(
        "n => { const r = [...document.querySelectorAll('[data-testid=job-row]')];"
        " return r.length === n && r.every(e => e.dataset.status === 'succeeded'); }",
        arg=len(succeeded),
    )
    assert real_errors(errors) == []
