"""A real job with a validation set (``data.val_files``) validates before its first step and after
every ``test_freq``-th and the last step, reporting verl's ``val-core/<source>/reward/mean@<n>``:
each value is the job's grader applied again to the replies it kept."""

from __future__ import annotations

import json
from pathlib import Path

from jigsaw_engine.control.step_metrics import BEFORE_TRAIN_PREFIX
from jigsaw_engine.envs.graders import get_grader
from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.spec import parse_pipeline_spec


def _validation_set(path: Path) -> Path:
    rows = [
        {"prompt": f"Compute {a}+{b}.", "answer": str(a + b), **({"data_source": "small"} if a + b < 5 else {})}
        for a in range(3)
        for b in range(4)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_validation_curves_are_reported_at_step_0_every_test_freq_and_the_last(
    tmp_path: Path, tiny_policy_cache: Path
) -> None:
    spec = {
        "name": "val",
        "model": "tiny-qwen2-1m",
        "data": {"train_batch_size": 4, "val_files": str(_validation_set(tmp_path / "val.jsonl"))},
        "rollout": {
            "n": 2,
            "max_response_length": 8,
            "val_kwargs": {"n": 2, "temperature": 1.0, "do_sample": True},
        },
        "resources": {"num_gpus": 1},
        "trainer": {"total_steps": 3, "test_freq": 2},
    }
    options = RealJobOptions(warmup_steps=40, cache_dir=tiny_policy_cache)
    pipeline = build_real_pipeline(parse_pipeline_spec(spec), train_parts=1, options=options)
    reports = [pipeline.run_step() for _ in range(3)]

    names = {"val-core/small/reward/mean@2", "val-core/unknown/reward/mean@2"}
    before = {k.removeprefix(BEFORE_TRAIN_PREFIX) for k in reports[0] if k.startswith(BEFORE_TRAIN_PREFIX)}
    assert before == names | {"timing_s/testing"}
    assert [names <= set(r) for r in reports] == [False, True, True]  # after steps 2 and 3 (the last)
    assert [v.steps_done for v in pipeline.validations] == [0, 2, 3]

    grade = get_grader("numeric")
    for validation in pipeline.validations:
        assert len(validation.replies) == 12 * 2
        for source in ("small", "unknown"):
            replies = [r for r in validation.replies if r.data_source == source]
            regraded = [grade(r.completion, r.answer) for r in replies]
            assert regraded == [r.reward for r in replies]
            value = validation.metrics[f"val-core/{source}/reward/mean@2"]
            assert 0.0 <= value <= 1.0 and value == sum(regraded) / len(regraded)
    assert (
        reports[2]["val-core/small/reward/mean@2"] == pipeline.validations[-1].metrics["val-core/small/reward/mean@2"]
    )
    assert any(r.reward > 0 for v in pipeline.validations for r in v.replies)  # the warmed-up policy answers some
