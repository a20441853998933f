"""The submit page's live estimate in a real headless Chromium against the live server: it
appears for the preset, follows the spec as it is edited, names a bad field, and shows a
quota that would block the job; nothing is submitted."""

from __future__ import annotations

import json
import re

import pytest

from tenants.models import Quota
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _steps_of(total_text: str) -> int:
    found = re.search(r"for (\d+) steps$", total_text)
    assert found, total_text
    return int(found.group(1))


def test_the_estimate_follows_the_spec_as_it_is_edited(browser, live_server_url) -> None:
    make_member("alice", "acme")
    page, errors = sign_in(browser, live_server_url, "alice")
    page.goto(f"{live_server_url}/new")
    total = page.get_by_test_id("estimate-total")
    total.wait_for()
    spec = json.loads(page.get_by_test_id("spec-input").input_value())
    first = total.inner_text()
    assert _steps_of(first) == spec["trainer"]["total_steps"]
    assert re.fullmatch(r"\d+\.\d\d USD", page.get_by_test_id("estimate-cost").inner_text())
    assert page.get_by_test_id("estimate-queue").inner_text() == "none (8 GPUs free)"
    first_cost = float(page.get_by_test_id("estimate-cost").inner_text().split()[0])

    # Four times the steps: the estimate is asked again once the typing stops, and grows.
    spec["trainer"]["total_steps"] *= 4
    page.get_by_test_id("spec-input").fill(json.dumps(spec, indent=2))
    page.wait_for_function(
        "(before) => { const t = document.querySelector('[data-testid=estimate-total]')?.textContent;"
        " return t && t !== before; }",
        arg=first,
    )
    assert _steps_of(total.inner_text()) == spec["trainer"]["total_steps"]
    assert float(page.get_by_test_id("estimate-cost").inner_text().split()[0]) > first_cost
    page.screenshot(path=str(ARTIFACTS / "submit-estimate.png"), full_page=True)

    # A bad field: the estimate says which, as a submit would.
    bad = {**spec, "rollout": {**spec.get("rollout", {}), "n": 0}}
    page.get_by_test_id("spec-input").fill(json.dumps(bad, indent=2))
    error = page.get_by_test_id("estimate-error")
    error.wait_for()
    assert "spec.rollout.n" in error.inner_text() and "must be >= 1, got 0" in error.inner_text()

    # A quota that would refuse it: shown beside the figures.
    Quota.objects.filter(tenant__slug="acme").update(max_gpus_per_job=1)
    page.get_by_test_id("spec-input").fill(json.dumps(spec, indent=2))
    blockers = page.get_by_test_id("estimate-blockers")
    blockers.wait_for()
    assert "your tenant's limit per job is 1" in blockers.inner_text()
    assert Job.objects.count() == 0
    assert real_errors(errors) == []


def test_a_finished_job_shows_its_estimate_against_its_run(browser, live_server_url, engine_speed) -> None:
    engine_speed(float("inf"))
    make_member("alice", "acme")
    page, errors = sign_in(browser, live_server_url, "alice")
    page.goto(f"{live_server_url}/new")
    page.get_by_test_id("estimate-total").wait_for()
    spec = json.loads(page.get_by_test_id("spec-input").input_value())
    spec["trainer"]["total_steps"] = 4
    page.get_by_test_id("spec-input").fill(json.dumps(spec))
    page.get_by_test_id("job-name-input").fill("e2e-estimate")
    page.get_by_test_id("submit-job").click()
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f-]{36}$"))

    # Once it has ended, its page puts the estimate beside what it did.
    panel = page.get_by_test_id("estimate-accuracy")
    panel.wait_for(timeout=60_000)
    step = page.get_by_test_id("accuracy-step").inner_text().split("\t")
    assert step[0] == "Time per step" and re.fullmatch(r"[+-]\d+%", step[3])
    assert re.fullmatch(r"[+-]\d+%", page.get_by_test_id("accuracy-gpu-hours").inner_text().split("\t")[3])
    assert "over 4 steps" in panel.inner_text()
    page.screenshot(path=str(ARTIFACTS / "job-estimate-accuracy.png"), full_page=True)
    assert real_errors(errors) == []


def test_picking_a_model_rewrites_the_spec_and_the_estimate(browser, live_server_url) -> None:
    make_member("alice", "acme")
    page, errors = sign_in(browser, live_server_url, "alice")
    page.goto(f"{live_server_url}/new")
    total = page.get_by_test_id("estimate-total")
    total.wait_for()
    picker = page.get_by_test_id("model-select")
    before_spec = json.loads(page.get_by_test_id("spec-input").input_value())
    assert picker.input_value() == before_spec["model"]
    options = picker.locator("option").all_inner_texts()
    assert any(o.startswith("qwen2.5-14b (simulated, 14.7B params)") for o in options)

    per_step = page.get_by_test_id("estimate-step").inner_text()
    picker.select_option("qwen2.5-14b")
    spec = json.loads(page.get_by_test_id("spec-input").input_value())
    assert spec == {**before_spec, "model": "qwen2.5-14b"}  # only the model changed
    page.wait_for_function(
        "(before) => document.querySelector('[data-testid=estimate-step]')?.textContent !== before", arg=per_step
    )
    # A model typed by hand is shown as what the spec says.
    page.get_by_test_id("spec-input").fill(json.dumps({**spec, "model": "no-such-model"}))
    assert picker.input_value() == ""
    assert "no-such-model (in the spec)" in picker.locator("option").first.inner_text()
    assert real_errors(errors) == []
