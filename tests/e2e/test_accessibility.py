"""Every page of the dashboard, checked with axe-core (the accessibility engine, injected from
the frontend's dev dependencies) in a real headless Chromium: no serious or critical violation.
Each page is checked with the data a user would have on it (finished jobs, the staff view)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tenants.models import Role
from tenants.services import membership_add
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import off_loop
from tests.e2e.test_dashboard import PASSWORD, real_errors, sign_in
from tests.e2e.test_jobs_list import submit, wait_terminal

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parents[2] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


def blocking_violations(page: Any, name: str) -> list[str]:
    """axe-core's serious and critical violations on what ``page`` shows now, one line each."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    result = page.evaluate("() => axe.run(document, { resultTypes: ['violations'] })")
    return [
        f"{name}: {v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:4]}"
        for v in result["violations"]
        if v["impact"] in BLOCKING
    ]


def test_no_page_has_a_serious_or_critical_accessibility_violation(
    browser, live_server_url, engine_speed, make_actor
) -> None:
    assert AXE.exists(), f"{AXE} is missing: `make frontend` installs the dashboard's dev dependencies"
    engine_speed(40.0)
    actor = make_actor("acme")
    base = live_server_url

    def staff_owner() -> str:
        user = get_user_model().objects.create_user(username="root", password=PASSWORD, is_staff=True)
        membership_add(tenant=actor.tenant, user=user, role=Role.OWNER)
        return str(user.username)

    username = off_loop(staff_owner)
    first, second = submit(actor.token, "a11y-alpha"), submit(actor.token, "a11y-beta")
    wait_terminal([first, second])

    found: list[str] = []
    anonymous = browser.new_page()
    anonymous.goto(f"{base}/")
    anonymous.locator("#id_username").wait_for()
    found += blocking_violations(anonymous, "sign-in")
    anonymous.close()

    page, errors = sign_in(browser, base, username)
    pages = [
        ("jobs", "/", "[data-testid=job-row]"),
        ("job", f"/jobs/{first}", "[data-testid=clone-from-checkpoint]"),
        ("new-job", "/new", "#job-preset option"),
        ("compare", f"/compare?jobs={first},{second}", "[data-testid^=compare-chart-][data-drawn]"),
        ("cluster", "/cluster", "[data-testid=cluster-timeline]"),
        ("manage", "/manage", "[data-testid=tenant-row]"),
        ("not-found", "/jobs/no/such-page", "main .notice"),
    ]
    for name, path, ready in pages:
        page.goto(f"{base}{path}")
        page.locator(ready).first.wait_for(state="attached", timeout=30_000)
        found += blocking_violations(page, name)
        page.screenshot(path=str(ARTIFACTS / f"a11y-{name}.png"), full_page=True)

    # What opens on a page: the jobs list's status menu, the clone dialog, the quota form.
    page.goto(f"{base}/")
    page.get_by_test_id("status-filter-toggle").click()
    page.get_by_test_id("status-option-succeeded").wait_for()
    found += blocking_violations(page, "jobs, status menu open")
    page.goto(f"{base}/jobs/{first}")
    page.get_by_test_id("clone-from-checkpoint").first.click()
    page.get_by_test_id("clone-dialog").wait_for()
    found += blocking_violations(page, "job, clone dialog open")
    page.keyboard.press("Escape")
    page.get_by_test_id("clone-dialog").wait_for(state="detached")
    # The charts (uPlot's canvas and its cursor) with their controls, a group collapsed.
    page.locator("[data-testid^=chart-][data-drawn]").first.wait_for()
    page.get_by_test_id("group-toggle").first.click()
    found += blocking_violations(page, "job, charts drawn")
    page.goto(f"{base}/manage")
    page.get_by_test_id("edit-quota").first.click()
    page.get_by_test_id("quota-form-acme").wait_for()
    found += blocking_violations(page, "manage, quota form open")
    page.screenshot(path=str(ARTIFACTS / "a11y-clone-dialog.png"), full_page=True)

    assert found == [], "\n".join(found)
    assert real_errors(errors) == []
