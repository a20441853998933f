"""The admin pages (/manage) in a real headless Chromium against the live server: a staff user
sees every tenant's quota against its usage, gets a field error for a bad limit, stops a
tenant's admissions with max_running_jobs = 0, watches its job wait in the global queue with a
quota reason, lets it in again, and finds the edits in the audit log; a user who is not staff
sees no Admin link and only a staff-only message at /manage."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tenants.models import Role
from tenants.services import audit_record, membership_add
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import check_widths
from tests.e2e.test_dashboard import PASSWORD, real_errors, sign_in
from tests.engine.builders import make_spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def submit_job(token: str, name: str) -> str:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    r = client.post(
        "/api/v1/jobs", {"name": name, "spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert r.status_code == 201, r.content
    return str(r.json()["id"])


def queue_row(page: Any, job_id: str) -> Any:
    return page.locator(f'[data-testid="queue-row"][data-job-id="{job_id}"]')


def test_admin_edits_a_quota_and_the_queue_follows(browser, live_server_url, make_actor) -> None:
    from playwright.sync_api import expect  # as in conftest: imported where a browser is used

    acme = make_actor("acme")
    globex = make_actor("globex")
    for i in range(50):  # more than one page of globex's audit log
        audit_record(tenant=globex.tenant, actor=None, action="test.noise", target=f"noise-{i}")
    users = get_user_model()
    root = users.objects.create_user(username="root", password=PASSWORD, is_staff=True)
    membership_add(tenant=acme.tenant, user=root, role=Role.OWNER)
    carol = users.objects.create_user(username="carol", password=PASSWORD)
    membership_add(tenant=acme.tenant, user=carol, role=Role.MEMBER)
    base = live_server_url

    page, errors = sign_in(browser, base, "root")
    page.get_by_test_id("nav-admin").click()
    page.wait_for_url(re.compile(r".*/manage$"))
    acme_row = page.locator('[data-testid="tenant-row"][data-tenant="acme"]')
    acme_row.wait_for()
    assert page.locator('[data-testid="tenant-row"]').count() == 2
    assert acme_row.get_by_test_id("tenant-running").inner_text().strip() == "0 / 4"
    assert acme_row.get_by_test_id("tenant-gpus").inner_text().startswith("0 / 8")  # guarantee 4 + borrow 4
    page.get_by_test_id("cluster-gpus").wait_for()

    # An invalid limit: the server's message appears at the field, which gets the focus.
    acme_row.get_by_test_id("edit-quota").click()
    form = page.get_by_test_id("quota-form-acme")
    running = form.get_by_test_id("quota-input-max_running_jobs")
    running.fill("-1")
    form.get_by_test_id("quota-save").click()
    error = form.locator('[data-testid="quota-field-error"][data-field="max_running_jobs"]')
    error.wait_for()
    assert "greater than or equal to 0" in error.inner_text()
    assert running.get_attribute("aria-invalid") == "true"
    assert page.evaluate("document.activeElement?.dataset.testid") == "quota-input-max_running_jobs"
    page.screenshot(path=str(ARTIFACTS / "admin-quota-error.png"), full_page=True)

    # max_running_jobs = 0: the row updates from the response; acme's next job waits on its quota.
    running.fill("0")
    form.get_by_test_id("quota-save").click()
    form.get_by_test_id("quota-form-message").filter(has_text="Saved").wait_for()
    assert "max_running_jobs 4 → 0" in form.get_by_test_id("quota-form-message").inner_text()
    assert error.count() == 0
    assert acme_row.get_by_test_id("tenant-running").inner_text().strip() == "0 / 0"

    job_id = submit_job(acme.token, "held-by-quota")
    reason = queue_row(page, job_id).get_by_test_id("queue-reason")
    reason.filter(has_text="quota:").wait_for(timeout=15_000)
    assert "0 jobs running, the limit is 0" in reason.inner_text()
    assert queue_row(page, job_id).get_attribute("data-admitted") == "false"
    page.screenshot(path=str(ARTIFACTS / "admin-page.png"), full_page=True)

    # Raise it to 2 in the UI: admission runs after the edit and the job leaves the queue.
    running.fill("2")
    running.press("Enter")  # the keyboard submits the form too
    form.get_by_test_id("quota-form-message").filter(has_text="max_running_jobs 0 → 2").wait_for()
    page.wait_for_function(
        """(id) => {
            const row = document.querySelector(`[data-testid=queue-row][data-job-id="${id}"]`);
            return !row || row.dataset.admitted === 'true';
        }""",
        arg=job_id,
        timeout=15_000,
    )

    # Both edits are in the audit log, newest first; the tenant filter keeps them.
    audit = page.locator('[data-testid="audit-row"][data-action="quota.update"]')
    audit.filter(has_text="max_running_jobs: 0 → 2").wait_for()
    assert "root" in audit.first.inner_text()
    page.get_by_test_id("audit-tenant-filter").select_option("globex")
    globex_rows = page.locator('[data-testid="audit-row"][data-tenant="globex"]')
    expect(globex_rows).to_have_count(50)  # a page
    expect(page.get_by_test_id("audit-row")).to_have_count(50)
    page.get_by_test_id("audit-load-more").click()
    expect(globex_rows).to_have_count(53)  # the noise, its tenant, owner and token
    expect(page.get_by_test_id("admin-audit").get_by_text("End of the log.")).to_be_visible()
    page.get_by_test_id("audit-tenant-filter").select_option("acme")
    audit.filter(has_text="max_running_jobs: 4 → 0").wait_for()

    # Escape closes the form and gives the focus back to its button.
    running.focus()
    page.keyboard.press("Escape")
    assert form.count() == 0
    assert page.evaluate("document.activeElement?.dataset.testid") == "edit-quota"

    # A reload of /manage is served the app; wide screens get the two-column layout.
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{base}/manage")
    acme_row.wait_for()
    assert acme_row.get_by_test_id("tenant-running").inner_text().strip().endswith("/ 2")
    page.screenshot(path=str(ARTIFACTS / "admin-page-1920.png"), full_page=True)
    check_widths(page, "admin", ARTIFACTS)
    assert real_errors(errors) == []

    # Carol is no staff: no Admin link, /manage says why, the API refuses.
    other, other_errors = sign_in(browser, base, "carol")
    other.wait_for_load_state("networkidle")
    assert other.get_by_test_id("nav-admin").count() == 0
    other.goto(f"{base}/manage")
    notice = other.get_by_test_id("admin-staff-only")
    notice.wait_for()
    assert "needs a staff account" in notice.inner_text()
    assert other.get_by_test_id("admin-page").count() == 0
    assert other.request.get(f"{base}/api/v1/admin/tenants").status == 403
    other.screenshot(path=str(ARTIFACTS / "admin-staff-only.png"), full_page=True)
    assert real_errors(other_errors) == []
