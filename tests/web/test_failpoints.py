"""Failpoints are inert unless a fault-injection run names them, and refused in production."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from webapp import failpoints


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


def test_production_settings_refuse_failpoints() -> None:
    env = {
        **os.environ,
        "JIGSAW_ENV": "production",
        "SECRET_KEY": "x" * 60,
        "ALLOWED_HOSTS": "example.org",
        "JIGSAW_FAILPOINTS": "dispatch.after_submit=sleep:1",
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "JIGSAW_FAILPOINTS: fault injection is for test runs" in done.stderr
