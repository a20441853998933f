"""A real tiny job's checkpoints, written the way the service's engine writes them
(``<root>/<job id>/step-NNNNNN/``): a tiny preset trained for real, a step or two, on this
machine's cores. For tests of what a tenant does with a checkpoint (download it, load it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.real.pipeline import RealPipeline
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from tests.engine.builders import make_spec

TINY_JOB_SPEC = make_spec(
    name="tiny-download",
    model="tiny-qwen2-1m",
    data={"train_batch_size": 4},
    rollout={"n": 2, "max_response_length": 8},
    resources={"num_gpus": 1},
    trainer={"total_steps": 2},
)


def train_tiny_job(root: Path, job_id: str, *, steps: int = 1, policy_cache: Path | None = None) -> RealPipeline:
    """``steps`` steps of a tiny job checkpointing under ``root / job_id``; the pipeline, to
    compare what was written with what it holds."""
    pipeline = build_real_pipeline(
        parse_pipeline_spec(TINY_JOB_SPEC),
        train_parts=1,
        options=RealJobOptions(
            warmup_steps=1, cache_dir=policy_cache, checkpoint_dir=root / job_id, rollout_engine="torch"
        ),
    )
    for _ in range(steps):
        pipeline.run_step()
    return pipeline


def trained_root(tmp_path_factory: pytest.TempPathFactory, job_id: str, policy_cache: Path) -> Path:
    """A fresh checkpoint folder holding one trained step of job ``job_id`` (a module's fixture)."""
    root = tmp_path_factory.mktemp("checkpoints")
    train_tiny_job(root, job_id, policy_cache=policy_cache)
    return root
