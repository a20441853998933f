"""The metric charts as a researcher uses them, in headless Chromium: groups by prefix that
collapse, a filter box, a cursor shared by every chart, drag to zoom and double-click to reset,
the keyboard, EMA smoothing, a log scale, the x axis by step, wall time or tokens; and on the
compare page one line per job in a colour that stays with the job."""

from __future__ import annotations

import re

import pytest

from tests.e2e.charts import canvas_image, colour_pixels, drag, hover, readout, stored_run
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import off_loop
from tests.e2e.test_dashboard import PASSWORD, real_errors, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

STEPS = 40
ACCENT = "#2857c5"  # the job page's line colour
SCORE = "chart-critic_score_mean"
ENTROPY = "chart-actor_entropy"


def metrics(step_s: float, offset: float) -> dict[str, object]:
    """Eight metrics of six verl groups; the score is noisy (every other step +-0.1)."""
    return {
        "critic/score/mean": lambda s: offset + s / STEPS + (0.1 if s % 2 else -0.1),
        "critic/rewards/mean": lambda s: offset + s / STEPS,
        "actor/entropy": lambda s: 2.0 - s / STEPS,
        "actor/ppo_kl": lambda s: 0.001 * s,
        "response_length/mean": lambda s: 200.0 + 5 * s,
        "timing_s/step": lambda s: step_s,
        "perf/total_num_tokens": lambda s: 1000.0,
        "val-core/gsm8k/acc": lambda s: 0.2 + 0.01 * s,
    }


def test_job_and_compare_charts(browser, live_server_url, make_actor) -> None:
    actor = make_actor("acme")
    actor.user.set_password(PASSWORD)
    off_loop(actor.user.save)
    alpha, beta, gamma = (
        off_loop(lambda name=name, s=s, o=o: stored_run(actor.tenant, name, STEPS, metrics(s, o)))
        for name, s, o in (("alpha", 2.0, 0.0), ("beta", 3.0, 0.5), ("gamma", 1.0, 1.0))
    )
    base = live_server_url
    page, errors = sign_in(browser, base, actor.user.username)

    # -- the job page: groups in verl's order, every chart drawn --------------------------------
    page.goto(f"{base}/jobs/{alpha}")
    page.locator(f"[data-testid={SCORE}][data-drawn]").wait_for()
    groups = page.get_by_test_id("metric-group")
    assert [groups.nth(i).get_attribute("data-group") for i in range(groups.count())] == [
        "critic", "actor", "response_length", "timing_s", "perf", "val-core",
    ]  # fmt: skip
    assert page.get_by_test_id("metric-count").inner_text() == "8 metrics"
    assert colour_pixels(page, SCORE, [ACCENT])[0] > 50, "the score line is not drawn"
    assert readout(page, SCORE) == "0.9"  # the latest value, before any cursor (40/40 - 0.1)
    # A chart is drawn when it first comes near the viewport: scroll to the last one.
    page.get_by_test_id("chart-val-core_gsm8k_acc").scroll_into_view_if_needed()
    page.locator("[data-testid=chart-val-core_gsm8k_acc][data-drawn]").wait_for()
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / "charts-job.png"), full_page=True)

    # -- the filter box, and a group collapsed from the keyboard ------------------------------
    page.get_by_test_id("metric-filter").fill("mean")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=metric-group]').length === 2")
    assert page.get_by_test_id("metric-count").inner_text() == "3 of 8 metrics"
    assert page.locator(f"[data-testid={ENTROPY}]").count() == 0
    page.get_by_test_id("metric-filter").fill("")
    actor_toggle = page.locator("[data-group=actor] [data-testid=group-toggle]")
    actor_toggle.focus()
    page.keyboard.press("Enter")
    assert actor_toggle.get_attribute("aria-expanded") == "false"
    assert page.locator(f"[data-testid={ENTROPY}]").count() == 0
    page.keyboard.press("Enter")
    page.locator(f"[data-testid={ENTROPY}][data-drawn]").wait_for()

    # -- one cursor for every chart: hovering the score moves the entropy chart's read-out -------
    hover(page, SCORE, 0.5)
    at = readout(page, SCORE)
    assert re.fullmatch(r"step (\d+): .+", at), at
    step = at.split(":")[0]
    page.wait_for_function(
        "([id, s]) => document.querySelector(`[data-testid='${id}'] [data-testid=chart-readout]`)"
        ".textContent.startsWith(s + ':')",
        arg=[ENTROPY, step],
    )

    # -- drag to zoom: the left edge now reads a later step; double-click restores the picture ---
    page.mouse.move(0, 0)
    whole = canvas_image(page, SCORE)
    drag(page, SCORE, 0.5, 0.9)
    hover(page, SCORE, 0.02)
    left_step = int(readout(page, SCORE).split(":")[0].removeprefix("step "))
    assert left_step >= STEPS * 0.45, f"zoomed chart's left edge reads step {left_step}"
    page.screenshot(path=str(ARTIFACTS / "charts-job-zoomed.png"), full_page=True)
    page.locator(f"[data-testid={SCORE}] .u-over").dblclick()
    page.mouse.move(0, 0)
    page.wait_for_function(
        "([id, img]) => document.querySelector(`[data-testid='${id}'] canvas`).toDataURL() === img",
        arg=[SCORE, whole],
    )

    # -- the keyboard: End reads the last step, Left the one before, + zooms and 0 resets ---------
    plot = page.locator(f"[data-testid={SCORE}] .chart-plot")
    plot.focus()
    page.keyboard.press("End")
    assert readout(page, SCORE) == f"step {STEPS}: 0.9"
    page.keyboard.press("ArrowLeft")
    assert readout(page, SCORE) == f"step {STEPS - 1}: 1.075"
    page.keyboard.press("+")
    assert canvas_image(page, SCORE) != whole
    page.keyboard.press("0")
    assert canvas_image(page, SCORE) == whole

    # -- smoothing: the read-out gives the smoothed value; the raw line stays, faint -------------
    page.get_by_test_id("smoothing").fill("0.9")
    page.wait_for_function(
        "([id, img]) => document.querySelector(`[data-testid='${id}'] canvas`).toDataURL() !== img",
        arg=[SCORE, whole],
    )
    plot.focus()
    page.keyboard.press("End")
    smoothed = float(readout(page, SCORE).split(": ")[1])
    assert 0.7 < smoothed < 0.9, smoothed  # the trend without the +-0.1 zig-zag, lagging a little
    page.screenshot(path=str(ARTIFACTS / "charts-job-smoothed.png"), full_page=True)
    page.get_by_test_id("smoothing").fill("0")

    # -- the x axis by wall time (2 s a step) and by tokens (1000 a step) ------------------------
    page.get_by_test_id("x-axis").select_option("wall")
    plot.focus()
    page.keyboard.press("End")
    assert readout(page, SCORE) == "1m 20s: 0.9"
    page.get_by_test_id("x-axis").select_option("tokens")
    plot.focus()
    page.keyboard.press("End")
    assert readout(page, SCORE) == "40k: 0.9"
    page.get_by_test_id("x-axis").select_option("step")

    # -- log scale: another picture of the same data ------------------------------------------
    page.get_by_test_id("log-scale").check()
    page.wait_for_function(
        "([id, img]) => document.querySelector(`[data-testid='${id}'] canvas`).toDataURL() !== img",
        arg=[SCORE, whole],
    )
    page.screenshot(path=str(ARTIFACTS / "charts-job-log.png"), full_page=True)

    # -- compare: a line per job in its legend colour; removing one repaints no other ------------
    page.goto(f"{base}/compare?jobs={alpha},{beta},{gamma}")
    chart = f"compare-{SCORE}"
    page.locator(f"[data-testid='{chart}'][data-drawn][data-lines='3']").wait_for()
    legend = {
        item.get_attribute("data-job-id"): item.get_attribute("data-color")
        for item in page.get_by_test_id("compare-legend-item").all()
    }
    assert len(set(legend.values())) == 3
    drawn = colour_pixels(page, chart, [legend[alpha], legend[beta], legend[gamma]])
    assert all(n > 30 for n in drawn), f"lines drawn per job: {drawn}"
    hover(page, chart, 0.5)
    assert re.fullmatch(r"step \d+: alpha .+, beta .+, gamma .+", readout(page, chart)), readout(page, chart)
    page.mouse.move(0, 0)
    page.get_by_test_id("compare-chart-val-core_gsm8k_acc").scroll_into_view_if_needed()
    page.locator("[data-testid=compare-chart-val-core_gsm8k_acc][data-drawn]").wait_for()
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / "charts-compare.png"), full_page=True)

    page.get_by_role("button", name="Remove beta from the comparison").click()
    page.locator(f"[data-testid='{chart}'][data-drawn][data-lines='2']").wait_for()
    after = {
        item.get_attribute("data-job-id"): item.get_attribute("data-color")
        for item in page.get_by_test_id("compare-legend-item").all()
    }
    assert after == {alpha: legend[alpha], gamma: legend[gamma]}
    drawn = colour_pixels(page, chart, [legend[alpha], legend[beta], legend[gamma]])
    assert drawn[0] > 30 and drawn[2] > 30 and drawn[1] == 0, f"after removing beta: {drawn}"
    page.screenshot(path=str(ARTIFACTS / "charts-compare-removed.png"), full_page=True)
    assert real_errors(errors) == []
