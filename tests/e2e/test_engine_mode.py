"""A user can tell a simulated run from a trained one: the jobs list, the job page, the compare
page and the cluster page show each job's engine mode as a badge, and where a simulated run is
shown, one line on what that means (the cost model's timings; no weights, samples or rewards)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import check_widths, off_loop
from tests.e2e.test_dashboard import PASSWORD, real_errors, sign_in
from tests.e2e.test_jobs_list import submit, wait_terminal
from webapp.jobs.models import EngineMode, Job, JobStatus

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MEANING = "timings and throughput come from the cost model; no weights, samples or rewards were produced."


def stored_real_run(simulated_id: str) -> str:
    """A finished real run as the service stores one (training one here would take minutes;
    the API tests cover submitting in real mode)."""

    def create() -> str:
        like = Job.objects.get(pk=simulated_id)
        job = Job.objects.create(
            tenant=like.tenant,
            name="trained-run",
            spec=like.spec,
            resolved_spec=like.resolved_spec,
            num_gpus=like.num_gpus,
            device_type=like.device_type,
            total_steps=like.total_steps,
            current_step=like.total_steps,
            status=JobStatus.SUCCEEDED,
            engine_mode=EngineMode.REAL,
        )
        return str(job.pk)

    return off_loop(create)


def test_every_page_says_whether_a_run_was_simulated(browser, live_server_url, engine_speed, make_actor) -> None:
    engine_speed(40.0)
    actor = make_actor("acme")
    actor.user.set_password(PASSWORD)
    off_loop(actor.user.save)
    base = live_server_url
    simulated = submit(actor.token, "simulated-run")
    assert wait_terminal([simulated])[simulated] == "succeeded"
    real = stored_real_run(simulated)

    page, errors = sign_in(browser, base, actor.user.username)
    page.wait_for_function("() => document.querySelectorAll('[data-testid=job-row]').length === 2")
    for job_id, mode in ((simulated, "simulated"), (real, "real")):
        row = page.locator(f"[data-testid=job-row][data-job-id='{job_id}']")
        assert row.get_by_test_id("engine-mode").inner_text().strip() == mode
    note = page.get_by_test_id("simulated-note")
    assert note.is_visible() and note.inner_text().strip() == f"Simulated runs: {MEANING}"
    check_widths(page, "engine-mode-jobs-list", ARTIFACTS)

    page.goto(f"{base}/jobs/{simulated}")
    page.get_by_test_id("job-status").wait_for()
    assert page.get_by_test_id("engine-mode").inner_text().strip() == "simulated"
    assert page.get_by_test_id("simulated-note").inner_text().strip() == f"Simulated run: {MEANING}"
    check_widths(page, "engine-mode-job-simulated", ARTIFACTS)

    page.goto(f"{base}/jobs/{real}")
    page.get_by_test_id("job-status").wait_for()
    assert page.get_by_test_id("engine-mode").inner_text().strip() == "real"
    assert page.get_by_test_id("simulated-note").count() == 0  # nothing to explain about a trained run
    page.screenshot(path=str(ARTIFACTS / "engine-mode-job-real.png"), full_page=True)

    page.goto(f"{base}/compare?jobs={simulated},{real}")
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=compare-legend-item] [data-testid=engine-mode]').length === 2"
    )
    modes = {
        item.get_attribute("data-job-id"): item.get_by_test_id("engine-mode").inner_text().strip()
        for item in page.get_by_test_id("compare-legend-item").all()
    }
    assert modes == {simulated: "simulated", real: "real"}
    assert page.get_by_test_id("simulated-note").inner_text().strip() == f"Simulated runs: {MEANING}"
    check_widths(page, "engine-mode-compare", ARTIFACTS)

    page.goto(f"{base}/cluster")
    page.get_by_test_id("cluster-summary").wait_for(timeout=30_000)
    assert page.get_by_test_id("cluster-summary").get_by_test_id("engine-mode").inner_text().strip() == "simulated"
    assert page.get_by_test_id("simulated-note").inner_text().strip() == f"Simulated engine: {MEANING}"
    check_widths(page, "engine-mode-cluster", ARTIFACTS)

    assert real_errors(errors) == []
