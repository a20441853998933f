"""The retrieval job as `jigsaw run` and the service build it starts from a policy RL can improve.

GRPO learns nothing from a group whose replies all score 0 (every advantage is 0), so a warm-up
that leaves every reply wrong makes the whole run a no-op, however long it trains.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw_engine.real.jobs import RETRIEVAL_LR, TINY_LR, build_real_pipeline
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.workload_file import load_workload_file

pytestmark = pytest.mark.slow


def test_the_retrieval_job_starts_by_searching_and_answering_some_questions_right() -> None:
    # The example's retrieval job, default warm-up.
    example = load_workload_file(Path(__file__).parents[2] / "examples" / "real-cpu.yaml")
    spec = parse_pipeline_spec(next(p for p in example.pipelines if p["workload"] == "search"))
    job = build_real_pipeline(spec, train_parts=1).job
    assert job.trainer.config.lr == RETRIEVAL_LR < TINY_LR
    steps = [job.run_step() for _ in range(2)]
    assert all(step["rollout/tool_s"] > 0 for step in steps)  # the replies called the retriever
    scores = [step["critic/score/mean"] for step in steps]
    # 64 replies; after the warm-up about a third are right (0.22-0.44 per step on seeds 0-2).
    # With the earlier, shorter warm-up every one was wrong.
    assert sum(scores) / len(scores) > 0.1, scores
