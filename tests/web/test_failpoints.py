"""The control plane's production settings refuse fault injection."""

from __future__ import annotations

import os
import subprocess
import sys


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
