"""One embedded Ray cluster for the whole test session (starting one costs seconds), for every
test folder that needs one (the Ray tests, and the engine tests' actor-held engines)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

DECLARED_GPUS = 4
"""GPUs the session's Ray cluster declares on a machine that need not have any."""


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    from jigsaw_engine.runtime.ray.placement import EMBEDDED_RAY_SYSTEM_CONFIG

    ray.init(
        num_cpus=2,
        # Declared, not present: a GPU cluster's code runs on them (tests/ray/test_declared_gpus.py)
        # with its tiny models computing on the CPU. Nothing else books a GPU.
        num_gpus=DECLARED_GPUS,
        object_store_memory=256 * 2**20,  # the default takes 30% of RAM in /dev/shm
        include_dashboard=False,
        namespace="jigsaw",
        log_to_driver=False,
        _temp_dir="/tmp/jrt-ray",  # short: Ray's socket paths have a length limit
        _system_config=EMBEDDED_RAY_SYSTEM_CONFIG,  # the workers' priority, as `jigsaw run` starts them
    )
    try:
        yield
    finally:
        ray.shutdown()
