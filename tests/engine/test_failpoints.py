"""Failpoints are inert unless a fault-injection run names them."""

from __future__ import annotations

import time

import pytest

from jigsaw_engine import failpoints


@pytest.fixture()
def configured(monkeypatch: pytest.MonkeyPatch):
    def set_points(value: str) -> None:
        monkeypatch.setenv(failpoints.ENV_VAR, value)
        failpoints._configured.cache_clear()

    yield set_points
    failpoints._configured.cache_clear()


def test_a_named_failpoint_waits_and_others_do_not(configured) -> None:
    configured("dispatch.after_submit=sleep:0.3")
    started = time.monotonic()
    failpoints.failpoint("something.else")
    assert time.monotonic() - started < 0.1
    failpoints.failpoint("dispatch.after_submit")
    assert time.monotonic() - started >= 0.3


def test_an_unknown_action_is_refused_with_the_fix(configured) -> None:
    configured("dispatch.after_submit=crash")
    with pytest.raises(ValueError, match="the only action is sleep:<seconds>"):
        failpoints.failpoint("dispatch.after_submit")
