"""The Ray tests share the session's embedded cluster (``ray_cluster``, tests/ray_fixture.py)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")
