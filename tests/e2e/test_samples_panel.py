"""The samples panel in a real headless Chromium: a step's reward and completion-length
histograms, the step slider changing the samples shown, and one prompt's completions at two
steps side by side, with no serious axe-core violation. Screenshots: test-artifacts/job-samples*.png."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import off_loop
from tests.e2e.test_accessibility import blocking_violations
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from tests.e2e.test_job_page import submit_job
from webapp.jobs import journal
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _sample(prompt: str, completion: str, reward: float, tokens: int | None = None) -> dict[str, Any]:
    sample = {"prompt": prompt, "completion": completion, "answer": "5", "reward": reward, "turns": 1}
    return sample if tokens is None else {**sample, "response_tokens": tokens}


# Step 1 (stored before samples counted tokens): the model wrong; step 3: mostly right, on
# partly the same prompts.
STEPS = {
    1: [_sample("Compute 1+4.", "I think it is 7", 0.0), _sample("Compute 2+3.", "#### 6", 0.0)],
    2: [_sample("Compute 9-4.", "#### 5", 1.0, tokens=4)],
    3: [
        _sample("Compute 1+4.", "#### 5", 1.0, tokens=4),
        _sample("Compute 0+5.", "#### 5", 1.0, tokens=4),
        _sample("Compute 3+2.", "so the answer is 4", 0.0, tokens=9),
    ],
}


def _bins(page: Any, test_id: str) -> dict[str, int]:
    bins = page.get_by_test_id(test_id).get_by_test_id("histogram-bin")
    return {b.get_attribute("data-label"): int(b.get_attribute("data-count")) for b in bins.all()}


def test_a_steps_histograms_and_samples_follow_the_slider(browser, live_server_url) -> None:
    make_member("alice", "acme")
    page, errors = sign_in(browser, live_server_url, "alice")
    job_id = submit_job("alice", "e2e-samples")

    def add_samples() -> None:
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job_id)
            for step, samples in STEPS.items():
                journal.append_event(job, "samples", {"step": step, "samples": samples})

    off_loop(add_samples)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server_url}/jobs/{job_id}")
    rewards = page.get_by_test_id("reward-histogram")
    rewards.wait_for()
    # The newest step first: its three rewards, two right and one wrong.
    assert page.get_by_test_id("sample-step").inner_text() == "Step 3"
    assert "Reward at step 3, of the 3 stored samples" in rewards.inner_text()
    assert _bins(page, "reward-histogram") == {"0": 1, "1": 2}
    lengths = page.get_by_test_id("length-histogram")
    assert _bins(page, "length-histogram") == {"4": 2, "9": 1}
    assert "response length (tokens)" in lengths.inner_text()
    assert page.get_by_test_id("sample").count() == 3
    page.get_by_test_id("samples-panel").screenshot(path=str(ARTIFACTS / "job-samples.png"))
    assert blocking_violations(page, "job samples") == []

    # The slider, by keyboard, to the oldest stored step: its samples and histograms replace step 3's.
    slider = page.get_by_test_id("sample-step-slider")
    slider.focus()
    page.keyboard.press("Home")
    page.get_by_test_id("sample-step").filter(has_text="Step 1").wait_for()
    assert slider.get_attribute("aria-valuetext") == "Step 1"
    assert _bins(page, "reward-histogram") == {"0": 2}
    assert _bins(page, "length-histogram") == {"6": 1, "15": 1}  # no token counts: characters
    assert "response length (characters)" in lengths.inner_text()
    assert page.get_by_test_id("sample").count() == 2
    assert "I think it is 7" in page.get_by_test_id("sample-group").inner_text()

    # Step 1 beside step 3: the one prompt sampled at both, its completion at each.
    page.get_by_test_id("sample-compare-select").select_option("3")
    pair = page.get_by_test_id("sample-pair")
    pair.wait_for()
    assert pair.count() == 1
    sides = pair.get_by_test_id("sample-compare-side")
    assert "Compute 1+4." in pair.inner_text()
    assert "I think it is 7" in sides.nth(0).inner_text() and "reward 0" in sides.nth(0).inner_text()
    assert "#### 5" in sides.nth(1).inner_text() and "reward 1" in sides.nth(1).inner_text()
    page.get_by_test_id("samples-panel").screenshot(path=str(ARTIFACTS / "job-samples-compare.png"))
    assert blocking_violations(page, "job samples compared") == []
    assert real_errors(errors) == []
