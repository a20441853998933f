"""Rewards installed as ``jigsawrl.rewards`` entry points: listed, chosen by a spec, and every
way one can fail (raise, hang, return garbage, exit) scored 0 for that reply with its reason."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jigsaw_engine import api
from jigsaw_engine.control import step_metrics
from jigsaw_engine.envs.graders import get_grader
from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic
from jigsaw_engine.envs.reward import FAILED_SCORE, RewardError
from jigsaw_engine.envs.reward_registry import installed_rewards
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from tests.reward_plugin import INSTALLED, SLOW_LIMIT_S, operator_rewards

__all__ = ["operator_rewards"]  # the fixture: the test rewards installed where this process finds them


def test_the_built_in_graders_are_listed_first_with_what_they_suit() -> None:
    rewards = {r["name"]: r for r in api.list_rewards()}
    assert list(rewards)[:3] == ["exact_match", "numeric", "math"]
    assert all(r["builtin"] and r["description"] and r["suits"] for r in rewards.values())
    # The two regular-expression graders run in the environment's process; math has a deadline.
    assert (rewards["numeric"]["time_limit_s"], rewards["math"]["time_limit_s"]) == (None, 10.0)
    assert "jigsaw_engine.envs.graders:NUMERIC_REWARD" in rewards["numeric"]["source"]


def test_an_operators_package_adds_its_rewards_and_broken_entry_points_are_left_out(operator_rewards: Path) -> None:
    rewards = api.list_rewards()
    assert [r["name"] for r in rewards] == ["exact_match", "numeric", "math", *INSTALLED]
    by_name = {r["name"]: r for r in rewards}
    # A plain function: its docstring's first line, the default limit; a Reward: what it declares.
    assert by_name["contains_reference"]["description"] == "1 when the reference appears anywhere in the reply."
    assert by_name["contains_reference"]["time_limit_s"] == 5.0
    assert by_name["slow"]["time_limit_s"] == SLOW_LIMIT_S and by_name["slow"]["builtin"] is False
    assert by_name["moody"]["suits"] == "generated arithmetic"
    assert by_name["moody"]["source"] == "jigsaw_test_rewards:moody (jigsaw_test_rewards 0.1)"


def test_a_spec_names_an_installed_reward_or_is_refused_with_the_list(operator_rewards: Path) -> None:
    assert api.validate_spec({"data": {"grader": "contains_reference"}}) == []
    assert parse_pipeline_spec({"data": {"grader": "contains_reference"}}).grader == "contains_reference"
    [error] = api.validate_spec({"data": {"grader": "my_own_code"}, "rollout": {"n": 0}})[-1:]
    assert error.field == "data.grader"
    assert error.message.startswith("unknown reward 'my_own_code'; installed rewards: exact_match, numeric, math, ")
    assert "contains_reference" in error.message and "GET /api/v1/rewards" in error.message
    # An entry point that does not load is no reward.
    assert [e.field for e in api.validate_spec({"data": {"grader": "missing"}})] == ["data.grader"]


def test_without_the_package_its_rewards_are_unknown() -> None:
    assert "contains_reference" not in installed_rewards()
    [error] = api.validate_spec({"data": {"grader": "contains_reference"}})
    assert error.message.startswith("unknown reward 'contains_reference'")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("raises", "reward 'raises' raised ValueError: cannot read this reply"),
        ("garbage", "reward 'garbage' returned 'high' (str), not a number"),
        ("not_finite", "reward 'not_finite' returned nan, not a finite number"),
        ("exits", "reward 'exits' took its process down (its process exited with status 3)"),
        ("slow", f"reward 'slow' ran past its time limit of {SLOW_LIMIT_S:g} s (its process was replaced)"),
    ],
)
def test_each_failure_is_the_replys_with_its_reason(operator_rewards: Path, name: str, reason: str) -> None:
    grade = get_grader(name)
    started = time.monotonic()
    with pytest.raises(RewardError) as caught:
        grade("#### 7", "7")
    assert str(caught.value) == reason
    assert time.monotonic() - started < 10  # the slow one is cut at its limit, not after its 30 s
    with pytest.raises(RewardError):  # and a replaced child fails the same way again
        grade("#### 7", "7")


def test_the_control_layer_spells_the_jobs_failure_metric() -> None:
    assert step_metrics.REWARD_FAILURES == names.REWARD_FAILURES  # it sits below rl/, so it cannot import it


def test_an_episode_whose_reward_fails_scores_zero_and_says_why(operator_rewards: Path) -> None:
    tasks = generate_arithmetic(seed=0, count=4)
    good, bad = MathEnv(tasks, grader="contains_reference"), MathEnv(tasks, grader="garbage")
    turn = good.episode(tasks[0]).respond(f"#### {tasks[0].answer}")
    assert (turn.done, turn.reward, turn.reward_error) == (True, 1.0, "")
    turn = bad.episode(tasks[0]).respond(f"#### {tasks[0].answer}")
    assert (turn.done, turn.reward) == (True, FAILED_SCORE)
    assert turn.reward_error == "reward 'garbage' returned 'high' (str), not a number"
