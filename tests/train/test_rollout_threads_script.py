"""``scripts/measure_rollout_threads.py``'s measure: Amdahl's fraction of two workers' time that overlaps
(``jigsaw_engine.runtime.profile_fit.amdahl_fraction``)."""

from __future__ import annotations

import pytest

from jigsaw_engine.runtime.profile_fit import amdahl_fraction


def test_the_fraction_is_one_when_at_once_halves_the_time_and_zero_when_it_saves_nothing() -> None:
    assert amdahl_fraction(2.0, 1.0) == pytest.approx(1.0)
    assert amdahl_fraction(2.0, 2.0) == pytest.approx(0.0)
    # (2 - f) T at once against 2 T one after the other: 1.5 of 2.0 is f = 0.5.
    assert amdahl_fraction(2.0, 1.5) == pytest.approx(0.5)
    # A noisy pair outside the physical range is clamped, not extrapolated.
    assert amdahl_fraction(2.0, 2.4) == 0.0
    assert amdahl_fraction(2.0, 0.9) == 1.0
