"""The dashboard in a real headless Chromium against the live server: sign in, submit a job,
watch it run with its charts updating live, cancel it; another tenant sees none of it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tenants.models import Role
from tenants.services import membership_add, tenant_create
from tests.e2e.conftest import ARTIFACTS

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct-horse-battery-staple"


def make_member(username: str, slug: str) -> None:
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    tenant = tenant_create(slug=slug, name=slug.title())
    membership_add(tenant=tenant, user=user, role=Role.OWNER)


def sign_in(browser: Any, base: str, username: str) -> tuple[Any, list[str]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"{exc} {getattr(exc, 'stack', '')}"))
    page.goto(f"{base}/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page, errors


def real_errors(errors: list[str]) -> list[str]:
    # Chromium logs every 4xx response itself; the app's own errors are what matter.
    return [e for e in errors if "Failed to load resource" not in e]


def test_submit_watch_cancel_and_tenant_isolation(browser, live_server_url, engine_speed) -> None:
    engine_speed(40.0)  # startup about 0.5 s wall, then a step every ~0.1 s
    make_member("alice", "acme")
    make_member("bob", "globex")
    base = live_server_url

    page, errors = sign_in(browser, base, "alice")
    page.get_by_test_id("new-job-button").click()
    page.wait_for_url(re.compile(r".*/new$"))
    # The presets load after the page: the first one fills the spec unless it was edited. A
    # fill racing that load (select all, preset lands, text typed) appends to the preset.
    page.locator("#job-preset").wait_for()

    # A bad spec: the error appears at the field and nothing is submitted.
    spec = {"model": "qwen3-0.6b", "workload": "gsm8k", "data": {"train_batch_size": 16},
            "rollout": {"n": 0, "max_response_length": 512}, "trainer": {"total_steps": 400}}  # fmt: skip
    page.get_by_test_id("job-name-input").fill("e2e-job")
    page.get_by_test_id("spec-input").fill(json.dumps(spec))
    page.get_by_test_id("submit-job").click()
    page.get_by_test_id("field-error").first.wait_for()
    assert "spec.rollout.n" in page.get_by_test_id("field-error").first.inner_text()
    page.screenshot(path=str(ARTIFACTS / "submit-validation.png"), full_page=True)

    spec["rollout"]["n"] = 4
    page.get_by_test_id("spec-input").fill(json.dumps(spec))
    page.get_by_test_id("submit-job").click()
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]

    status = page.get_by_test_id("job-status")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-status]')?.textContent.trim() === 'running'", timeout=30_000
    )
    chart = page.get_by_test_id("chart-perf_throughput")
    chart.wait_for(timeout=30_000)
    events_before = page.get_by_test_id("event-row").count()
    page.wait_for_function(
        f"() => document.querySelectorAll('[data-testid=event-row]').length > {events_before + 3}", timeout=30_000
    )
    assert page.get_by_test_id("live-indicator").inner_text().strip().lower().startswith("live")
    page.screenshot(path=str(ARTIFACTS / "job-running.png"), full_page=True)

    page.get_by_test_id("cancel-job").click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-status]')?.textContent.trim() === 'cancelled'", timeout=30_000
    )
    assert status.inner_text().strip() == "cancelled"
    page.screenshot(path=str(ARTIFACTS / "job-cancelled.png"), full_page=True)

    page.goto(f"{base}/")
    rows = page.get_by_test_id("job-row")
    rows.first.wait_for()
    assert rows.count() == 1 and rows.first.get_attribute("data-job-id") == job_id
    page.screenshot(path=str(ARTIFACTS / "jobs-list.png"), full_page=True)
    assert real_errors(errors) == []

    # Bob, in another tenant, sees no job and cannot open Alice's.
    other, other_errors = sign_in(browser, base, "bob")
    other.wait_for_load_state("networkidle")
    assert other.get_by_test_id("job-row").count() == 0
    response = other.request.get(f"{base}/api/v1/jobs/{job_id}")
    assert response.status == 404
    other.screenshot(path=str(ARTIFACTS / "other-tenant-list.png"), full_page=True)
    assert real_errors(other_errors) == []
