"""The job log's line for a step whose installed reward failed on some replies."""

from __future__ import annotations

from jigsaw_engine.control.step_metrics import REWARD_FAILURES, reward_failure_log


def test_a_step_with_failed_rewards_is_logged_with_one_reason() -> None:
    samples = [{"reward_error": ""}, {"reward_error": "reward 'x' raised ValueError: no"}]
    assert reward_failure_log(3, {REWARD_FAILURES: 12.0}, samples) == (
        "step 3: the reward failed on 12 replies, scored 0; e.g. reward 'x' raised ValueError: no"
    )
    assert reward_failure_log(1, {REWARD_FAILURES: 1.0}, []) == "step 1: the reward failed on 1 reply, scored 0"
    # Every reply scored, a simulated step (no such metric), older samples without the field: nothing.
    assert reward_failure_log(2, {REWARD_FAILURES: 0.0}, samples) is None
    assert reward_failure_log(2, {"critic/score/mean": 0.5}, [{"reward": 1.0}]) is None
