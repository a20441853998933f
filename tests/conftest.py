"""Shared test set-up. Engine tests also run in an environment without Django, so the
control-plane fixtures are loaded only where Django is installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest_plugins = ["tests.ray_fixture"] + (
    ["tests.django_fixtures", "tests.live_server"] if importlib.util.find_spec("django") else []
)


@pytest.fixture(scope="session")
def tiny_policy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Warmed-up tiny start policies, shared by the whole session: a policy is keyed by all
    that shapes it (``warm_start_tiny_policy``), so a test that builds the same one again loads
    it instead of warming it up again. A test about the warm-up itself takes a cold folder."""
    return tmp_path_factory.mktemp("policies")
