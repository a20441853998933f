"""Rewards in a real headless Chromium: the submit form's reward picker lists the operator's
rewards beside the built-in graders and rewrites only data.grader; a sample whose reward failed
says why on the job page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import transaction

from tests.e2e.helpers import off_loop
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from tests.e2e.test_job_page import submit_job
from tests.reward_plugin import operator_rewards
from webapp.jobs import journal
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
__all__ = ["operator_rewards"]  # the fixture: the test rewards installed where the server finds them


def test_picking_a_reward_rewrites_data_grader(browser, live_server_url, operator_rewards: Path) -> None:
    make_member("alice", "acme")
    page, errors = sign_in(browser, live_server_url, "alice")
    page.goto(f"{live_server_url}/new")
    picker = page.get_by_test_id("reward-select")
    picker.wait_for()
    before = json.loads(page.get_by_test_id("spec-input").input_value())
    assert picker.input_value() == before.get("data", {}).get("grader", "numeric")
    options = picker.locator("option").all_inner_texts()
    assert options[:3] == [
        "exact_match (in-process, built in)",
        "numeric (in-process, built in)",
        "math (10 s per reply, built in)",
    ]
    assert "slow (0.3 s per reply, installed)" in options

    picker.select_option("moody")
    spec = json.loads(page.get_by_test_id("spec-input").input_value())
    assert spec == {**before, "data": {**before.get("data", {}), "grader": "moody"}}  # only the reward changed
    assert page.get_by_test_id("reward-help").inner_text() == "fails three ways in four. Suits: generated arithmetic."
    # A reward typed by hand that is not installed is shown as such.
    page.get_by_test_id("spec-input").fill(json.dumps({**spec, "data": {"grader": "my_code"}}))
    assert picker.input_value() == ""
    assert picker.locator("option").first.inner_text() == "my_code (not installed)"
    assert real_errors(errors) == []


def test_a_sample_whose_reward_failed_says_why(browser, live_server_url) -> None:
    make_member("alice", "acme")
    page, errors = sign_in(browser, live_server_url, "alice")
    job_id = submit_job("alice", "e2e-rewards")
    reason = "reward 'moody' ran past its time limit of 0.3 s (its process was replaced)"

    def add_samples() -> None:
        sample = {"prompt": "Compute 1+4.", "completion": "#### 5", "answer": "5", "reward": 0.0, "turns": 1}
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job_id)
            samples = [{**sample, "reward_error": reason}, {**sample, "answer": "3", "completion": "#### 3"}]
            journal.append_event(job, "samples", {"step": 1, "samples": samples})

    off_loop(add_samples)
    page.goto(f"{live_server_url}/jobs/{job_id}")
    notes = page.get_by_test_id("sample-reward-error")
    notes.first.wait_for()
    assert notes.all_inner_texts() == [f"Not scored: {reason}"]
    assert real_errors(errors) == []
