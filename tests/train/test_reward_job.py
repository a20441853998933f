"""An operator's reward in a real tiny job: its failures (an exception, a hang, garbage) cost the
reply its reward, with the reason in the samples, the step's metrics and the job's log, and never
the job; in the job's environment actor as in its own process."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import ray

from jigsaw_engine.api import EngineConfig, start_local_engine, validate_spec
from jigsaw_engine.contracts import EventKind
from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic
from jigsaw_engine.envs.reward_registry import REWARD_PATHS_ENV
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.runtime.ray.env_actor import RemoteEnvironment
from jigsaw_engine.runtime.ray.placement import unplaced
from tests.reward_plugin import SLOW_LIMIT_S, operator_rewards
from tests.train.test_real_runtime import tiny_spec
from tests.train.test_real_service import wait_until_ended

__all__ = ["operator_rewards"]  # the fixture: the test rewards installed where this process finds them

MOODY_REASONS = {
    0: "reward 'moody' raised ValueError: cannot read this reply",
    1: f"reward 'moody' ran past its time limit of {SLOW_LIMIT_S:g} s (its process was replaced)",
    2: "reward 'moody' returned 'high' (str), not a number",
    3: "",
}
"""What ``moody`` does to a reply, by its reference's remainder mod 4 (``tests/reward_plugin.py``)."""


def test_a_real_job_trains_through_its_rewards_failures(
    operator_rewards: Path, tiny_policy_cache: Path, tmp_path: Path
) -> None:
    """On the engine as the service runs it in real mode: each step's samples say why their
    reward failed, its metrics and the job's log count the failures, and the job completes."""
    config = EngineConfig.from_mapping(
        {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"},
        mode="real",
        real_cache_dir=str(tiny_policy_cache),
        real_checkpoint_dir=str(tmp_path / "checkpoints"),
    )
    spec = tiny_spec("moody", steps=2)
    spec["data"]["grader"] = "moody"
    assert validate_spec(spec, mode="real") == []
    engine = start_local_engine(config)
    try:
        engine.submit("moody", spec)
        events = wait_until_ended(engine, {"moody"}, timeout_s=600)  # a loaded machine: the warm-up alone
    finally:
        engine.close()
    statuses = [e.data["status"] for e in events if e.kind is EventKind.STATUS]
    assert statuses[-1] == "succeeded", statuses
    samples = [s for e in events if e.kind is EventKind.SAMPLES for s in e.data["samples"]]
    assert len(samples) == 8 and any(s["reward_error"] for s in samples)
    for sample in samples:  # moody fails by the task, whatever the reply
        assert sample["reward_error"] == MOODY_REASONS[int(sample["answer"]) % 4], sample
        if sample["reward_error"]:
            assert sample["reward"] == 0.0
    warnings = [e.data["message"] for e in events if e.kind is EventKind.LOG and e.data["level"] == "warning"]
    for m in [e.data for e in events if e.kind is EventKind.METRICS]:
        failed = int(m["metrics"][names.REWARD_FAILURES])
        assert failed > 0 and failed % 4 == 0, failed  # whole groups: all of a task's replies
        [line] = [w for w in warnings if w.startswith(f"step {m['step']}: ")]
        assert line.startswith(f"step {m['step']}: the reward failed on {failed} replies, scored 0; e.g. ")


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
