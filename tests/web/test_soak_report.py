"""The soak's arithmetic (``devstack.bench.stats``): samples land in the window they were sent
in, errors are counted where they happened, and the memory verdict sees a leak in the second
half of a run but not a warm-up in the first."""

from __future__ import annotations

import pytest

from devstack.bench import stats

MIB = 1024 * 1024


def test_latencies_and_errors_fall_in_the_window_they_were_sent_in() -> None:
    # 100 s in windows of 30: three whole windows; the trailing 10 s and anything before 0 are left out.
    samples = [(t + 0.5, float(t % 30 + 1)) for t in range(100)] + [(-1.0, 9999.0)]
    rows = stats.latency_windows(samples, error_times=[5.0, 31.0, 32.0, 95.0], duration_s=100, window_s=30)

    assert [row["from_s"] for row in rows] == [0.0, 30.0, 60.0]
    assert [row["n"] for row in rows] == [30, 30, 30]
    assert [row["errors"] for row in rows] == [1, 2, 0]
    # Latencies 1..30 ms in each window: nearest-rank p50 = 15, p95 = 29, p99 = 30.
    assert [(row["p50_ms"], row["p95_ms"], row["p99_ms"]) for row in rows] == [(15.0, 29.0, 30.0)] * 3


def test_an_empty_window_reports_no_percentiles() -> None:
    rows = stats.latency_windows([(1.0, 5.0)], error_times=[], duration_s=60, window_s=30)
    assert rows[1] == {"from_s": 30.0, "n": 0, "errors": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}


def test_gauges_report_the_last_value_of_each_window() -> None:
    samples = [(0.0, 1.0), (10.0, 2.0), (29.0, 3.0), (31.0, 4.0), (70.0, 9.0)]
    assert stats.value_windows(samples, duration_s=90, window_s=30) == [3.0, 4.0, 9.0]


def test_a_leak_in_the_second_half_is_not_flat() -> None:
    # 600 s, sampled every 2 s: 3 MiB/min of growth on 200 MiB, with +-1 MiB of jitter.
    leaking = [(t, (200 + 3 * t / 60 + (1 if t % 4 else -1)) * MIB) for t in range(0, 601, 2)]
    verdict = stats.memory_verdict({"server": leaking}, duration_s=600, tolerance_mib_per_min=1.0)

    group = verdict["groups"]["server"]
    assert group["judged_slope_mib_per_min"] == pytest.approx(3.0, abs=0.05)
    assert not group["flat"] and not verdict["flat"]


def test_a_warm_up_in_the_first_half_does_not_count() -> None:
    # Caches fill for the first two minutes (+50 MiB), then the process stays put with jitter.
    def rss(t: float) -> float:
        return (250 + 50 * min(t, 120) / 120 + (0.5 if t % 4 else -0.5)) * MIB

    steady = [(t, rss(t)) for t in range(0, 601, 2)]
    verdict = stats.memory_verdict({"server": steady, "worker": steady}, duration_s=600, tolerance_mib_per_min=1.0)

    assert verdict["flat"]
    assert verdict["groups"]["server"]["start_mib"] == 249.5
    assert abs(verdict["groups"]["server"]["judged_slope_mib_per_min"]) < 0.05


def test_a_bounded_history_is_judged_once_it_has_filled() -> None:
    # The engine keeps the last 190 s: the worker grows 16 MiB/min until then, then stays put.
    def rss(t: float) -> float:
        return (300 + 16 * min(t, 190) / 60 + (0.5 if t % 4 else -0.5)) * MIB

    worker = [(t, rss(t)) for t in range(0, 301, 2)]

    from_half = stats.memory_verdict({"worker": worker}, duration_s=300, tolerance_mib_per_min=1.0)
    assert not from_half["flat"]  # 150-190 s of filling leaks into the second half's slope

    verdict = stats.memory_verdict({"worker": worker}, 300, 1.0, fills_by_s={"worker": 190.0})
    group = verdict["groups"]["worker"]
    assert verdict["flat"] and group["from_s"] == 190.0
    assert abs(group["judged_slope_mib_per_min"]) < 0.2


def test_a_leak_after_the_history_fills_is_not_flat() -> None:
    def rss(t: float) -> float:
        return (300 + 16 * min(t, 190) / 60 + 3 * max(0.0, t - 190) / 60) * MIB

    verdict = stats.memory_verdict({"worker": [(t, rss(t)) for t in range(0, 301, 2)]}, 300, 1.0, {"worker": 190.0})
    assert not verdict["flat"]
    assert verdict["groups"]["worker"]["judged_slope_mib_per_min"] == pytest.approx(3.0, abs=0.05)


def test_a_run_shorter_than_the_history_is_not_judged_flat() -> None:
    steady = [(t, 300.0 * MIB) for t in range(0, 121, 2)]
    verdict = stats.memory_verdict({"worker": steady}, 120, 1.0, {"worker": 190.0})
    group = verdict["groups"]["worker"]
    assert not verdict["flat"] and group["judged_slope_mib_per_min"] is None
    assert group["too_short"] == "its history fills by 190 s: run at least 250 s to judge it"


def test_the_table_has_a_row_per_window() -> None:
    rows = [{"from_s": 0.0, "create_n": 10, "create_p99_ms": 42.5, "errors": 0}, {"from_s": 30.0, "create_n": 11}]
    lines = stats.table_text(rows).splitlines()
    assert len(lines) == 3 and "c p99" in lines[0] and "42.5" in lines[1]
    assert stats.markdown_table(rows).splitlines()[2].startswith("| 0 | 10 |")
