"""The Ray tests share the session's embedded cluster (``ray_cluster``, tests/ray_fixture.py)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")


def free_cpus() -> float:
    return float(ray.available_resources().get("CPU", 0.0))


def eventually(condition, timeout_s: float = 30.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    """Ray's resource counts reach the driver a moment after a reservation changes."""
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def all_cpus_free() -> float:
    """Every CPU of the session's Ray cluster, once an earlier test's reservation is gone."""
    total = float(ray.cluster_resources().get("CPU", 0.0))
    eventually(lambda: free_cpus() == total, what="every CPU free before the test")
    return total
