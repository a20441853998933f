"""Ended jobs of a tenant whose checkpoints a test reads: the service's record of a job (as
the engine's events leave it), pointed at checkpoints a real tiny job wrote."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.real_checkpoint import TINY_JOB_SPEC, trained_root
from webapp.jobs.models import EngineMode, Job, JobCheckpoint, JobStatus


def ended_job(
    tenant: Any,
    *,
    job_id: str | None = None,
    name: str = "tiny download",
    mode: str = EngineMode.REAL,
    steps: tuple[int, ...] = (1,),
) -> Job:
    job = Job.objects.create(
        id=job_id or uuid.uuid4(),
        tenant=tenant,
        name=name,
        status=JobStatus.SUCCEEDED,
        spec=TINY_JOB_SPEC,
        resolved_spec=TINY_JOB_SPEC,
        num_gpus=1,
        total_steps=2,
        current_step=max(steps),
        engine_mode=mode,
    )
    JobCheckpoint.objects.bulk_create(JobCheckpoint(job=job, step=s) for s in steps)
    return job


@contextmanager
def checkpoints_in(root: Path) -> Iterator[Path]:
    """The service reads real jobs' checkpoints from ``root`` meanwhile."""
    before = settings.ENGINE_REAL_CHECKPOINT_DIR
    settings.ENGINE_REAL_CHECKPOINT_DIR = str(root)
    try:
        yield root
    finally:
        settings.ENGINE_REAL_CHECKPOINT_DIR = before


def serving_trained_job(tmp_path_factory: pytest.TempPathFactory, job_id: str, policy_cache: Path) -> Iterator[Path]:
    """A module's fixture: one trained step of job ``job_id``, in the folder the service reads."""
    with checkpoints_in(trained_root(tmp_path_factory, job_id, policy_cache)) as root:
        yield root
