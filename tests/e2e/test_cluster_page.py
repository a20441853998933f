"""The cluster page in a real headless Chromium against the live server: two tenants' jobs
share the cluster; tenant A sees its own job's sub-stages by name (linked to the job) and
tenant B's only as "another tenant's job", on several device rows, with utilisation above 0."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from rest_framework.test import APIClient

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import check_widths, off_loop
from tests.e2e.test_dashboard import PASSWORD, real_errors, sign_in
from tests.engine.builders import make_spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OTHER = "another tenant's job"


def submit(token: str, name: str) -> str:
    def post() -> str:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        r = client.post(
            "/api/v1/jobs",
            {"name": name, "spec": make_spec(trainer={"total_steps": 20})},
            format="json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )
        assert r.status_code == 201, r.content
        return str(r.json()["id"])

    return off_loop(post)


def test_cluster_page_shows_both_tenants_work(browser, live_server_url, engine_speed, make_actor) -> None:
    engine_speed(20.0)
    a, b = make_actor("acme"), make_actor("globex")
    a.user.set_password(PASSWORD)
    off_loop(a.user.save)
    mine = submit(a.token, "cluster-alpha")
    theirs = submit(b.token, "globex-secret-job")

    page, errors = sign_in(browser, live_server_url, a.user.username)
    page.get_by_test_id("nav-cluster").click()
    page.wait_for_url(f"{live_server_url}/cluster")
    page.get_by_test_id("cluster-timeline").wait_for(timeout=30_000)

    # Both jobs' sub-stages appear (the page polls every 2 s): A's by id, B's unnamed.
    page.wait_for_function(
        "id => { const s = [...document.querySelectorAll('[data-testid=cluster-span]')];"
        " return s.some(e => e.dataset.job === id) && s.some(e => e.dataset.job === ''); }",
        arg=mine,
        timeout=60_000,
    )
    page.wait_for_function(
        "() => Number(document.querySelector('[data-testid=cluster-util-mean]')?.dataset.value) > 0", timeout=30_000
    )
    # Let A's job get through a training step, so the picture holds more than start-up.
    page.wait_for_function(
        "id => document.querySelector(`[data-testid=cluster-span][data-job='${id}'][data-kind=train]`) !== null",
        arg=mine,
        timeout=60_000,
    )

    rows = page.get_by_test_id("cluster-device-row")
    assert rows.count() >= 2
    busy = page.locator("[data-testid=cluster-device-row]:not([data-spans='0'])")
    assert busy.count() >= 2

    legend = page.get_by_test_id("cluster-legend-job")
    own = page.locator(f"[data-testid=cluster-legend-job][data-job='{mine}']")
    assert own.get_by_test_id("cluster-job-link").inner_text().strip() == "cluster-alpha"
    assert own.get_by_test_id("cluster-job-link").get_attribute("href") == f"/jobs/{mine}"
    assert OTHER in page.locator("[data-testid=cluster-legend-job][data-job='']").inner_text()
    assert legend.count() == 2

    html = page.content()
    assert "globex-secret-job" not in html and theirs not in html

    # Keyboard: Tab into the chart, move with the arrows, read the details line.
    page.locator("[data-testid=cluster-span][tabindex='0']").focus()
    page.keyboard.press("ArrowRight")
    details = page.get_by_test_id("cluster-span-details").inner_text()
    assert "step" in details and "share" in details

    # Once steps have finished: effective MFU over time and the estimate against verl, which
    # says it is an estimate and how it is made.
    page.wait_for_function(
        "() => Number(document.querySelector('[data-testid=cluster-verl]')?.dataset.speedup) > 0", timeout=30_000
    )
    assert float(page.get_by_test_id("cluster-mfu-mean").get_attribute("data-value") or 0) > 0
    readout = page.get_by_test_id("cluster-verl").inner_text()
    assert re.search(r"\d\.\d\d\u00d7 throughput vs verl \(estimated\)", readout), readout
    page.get_by_text("How is this estimated?").click()
    assert "Estimated, not measured" in page.get_by_test_id("cluster-verl-help").inner_text()

    page.screenshot(path=str(ARTIFACTS / "cluster-page.png"), full_page=True)
    check_widths(page, "cluster", ARTIFACTS)

    # A longer window keeps showing the same work.
    page.get_by_test_id("cluster-window").select_option("900")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=cluster-summary]')?.textContent.includes('15 min')",
        timeout=15_000,
    )
    assert page.locator(f"[data-testid=cluster-span][data-job='{mine}']").count() > 0

    # The job link goes to A's job page.
    own.get_by_test_id("cluster-job-link").click()
    page.wait_for_url(f"{live_server_url}/jobs/{mine}")
    time.sleep(0.2)
    assert real_errors(errors) == []
