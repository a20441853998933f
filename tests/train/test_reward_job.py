"""An operator's reward in a real tiny job: its failures (an exception, a hang, garbage) cost the
reply its reward, with the reason in the samples and the step's metrics, and never the job; in
the job's environment actor as in its own process."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import ray

from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic
from jigsaw_engine.envs.reward_registry import REWARD_PATHS_ENV
from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.runtime.ray.env_actor import RemoteEnvironment
from jigsaw_engine.runtime.ray.placement import unplaced
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from tests.reward_plugin import SLOW_LIMIT_S, operator_rewards

__all__ = ["operator_rewards"]  # the fixture: the test rewards installed where this process finds them

MOODY_REASONS = {
    0: "reward 'moody' raised ValueError: cannot read this reply",
    1: f"reward 'moody' ran past its time limit of {SLOW_LIMIT_S:g} s (its process was replaced)",
    2: "reward 'moody' returned 'high' (str), not a number",
    3: "",
}
"""What ``moody`` does to a reply, by its reference's remainder mod 4 (``tests/reward_plugin.py``)."""


def test_a_real_job_trains_through_its_rewards_failures(operator_rewards: Path, tiny_policy_cache: Path) -> None:
    spec = parse_pipeline_spec(
        {
            "model": "tiny-qwen2-1m",
            "workload": "gsm8k",
            "data": {"train_batch_size": 8, "grader": "moody"},
            "rollout": {"n": 4, "max_response_length": 8},
            "resources": {"num_gpus": 1},
            "trainer": {"total_steps": 2},
        }
    )
    options = RealJobOptions(warmup_steps=40, cache_dir=tiny_policy_cache)
    pipeline = build_real_pipeline(spec, train_parts=1, options=options)
    for step in range(2):
        metrics = pipeline.run_step()
        assert metrics["training/global_step"] == step + 1
        # Whole groups fail: moody fails by the task, whatever the reply.
        failed = metrics[names.REWARD_FAILURES]
        assert failed % 4 == 0 and failed > 0, failed
        samples = pipeline.job.recent_samples
        assert any(s["reward_error"] for s in samples)
        for sample in samples:
            assert sample["reward_error"] == MOODY_REASONS[int(sample["answer"]) % 4], sample
            if sample["reward_error"]:
                assert sample["reward"] == 0.0


@pytest.mark.ray
def test_the_environment_actor_reports_each_failure_and_lives_on(operator_rewards: Path, ray_cluster: None) -> None:
    tasks = [t for t in generate_arithmetic(seed=0, count=40) if t.answer.isdigit()]
    chosen = [next(t for t in tasks if int(t.answer) % 4 == kind) for kind in range(4)]
    build = partial(MathEnv, chosen, grader="moody")
    # The actor's process finds the operator's package as the engine's would: by $JIGSAW_REWARD_PATHS.
    reward_paths = {"runtime_env": {"env_vars": {REWARD_PATHS_ENV: str(operator_rewards)}}}
    remote = RemoteEnvironment.start(build(), build, actor_options={**unplaced(), **reward_paths})
    for _ in range(2):  # a hung child was replaced: the next round fails (and scores) the same way
        for kind, task in enumerate(chosen):
            turn = remote.episode(task).respond(f"#### {task.answer}")
            assert (turn.done, turn.reward_error) == (True, MOODY_REASONS[kind])
            assert turn.reward == (1.0 if kind == 3 else 0.0)
    assert ray.get(remote._actor.open_episodes.remote()) == 0
