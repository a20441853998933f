"""Shared test set-up. Engine tests also run in an environment without Django, so the
control-plane fixtures are loaded only where Django is installed."""

from __future__ import annotations

import importlib.util

pytest_plugins = ["tests.ray_fixture"] + (
    ["tests.django_fixtures", "tests.live_server"] if importlib.util.find_spec("django") else []
)
