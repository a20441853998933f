"""Self-refinement: feedback after a wrong answer, a reward that decays with each extra turn."""

from __future__ import annotations

import pytest

from jigsaw_engine.envs.protocol import EnvTask
from jigsaw_engine.envs.self_refine import (
    NO_ANSWER,
    TOO_HIGH,
    TOO_LOW,
    TRY_AGAIN,
    SelfRefineEnv,
    compute_refine_reward,
    render_feedback,
)

TASK = EnvTask(task_id="t", prompt="Compute 3+4.", answer="7", source="test")


def play(env: SelfRefineEnv, replies: list[str]) -> list[tuple[bool, float, str, str]]:
    episode = env.episode(TASK)
    return [(t.done, t.reward, t.observation, t.role) for t in map(episode.respond, replies)]


def test_right_first_time_pays_in_full() -> None:
    assert play(SelfRefineEnv([TASK]), ["#### 7"]) == [(True, 1.0, "", "user")]


def test_feedback_then_decayed_reward() -> None:
    env = SelfRefineEnv([TASK])
    assert env.max_turns == 3 and env.name == "self_refine"
    assert play(env, ["#### 9", "#### 7"]) == [(False, 0.0, TOO_HIGH, "user"), (True, 0.5, "", "user")]
    assert play(env, ["#### 2", "#### 8", "#### 7"]) == [
        (False, 0.0, TOO_LOW, "user"),
        (False, 0.0, TOO_HIGH, "user"),
        (True, 0.25, "", "user"),
    ]


def test_never_right_ends_with_zero_at_max_turns() -> None:
    turns = play(SelfRefineEnv([TASK]), ["#### 1", "I am not sure", "#### 6"])
    assert turns == [(False, 0.0, TOO_LOW, "user"), (False, 0.0, NO_ANSWER, "user"), (True, 0.0, "", "user")]


def test_decay_and_max_turns_are_configurable() -> None:
    env = SelfRefineEnv([TASK], max_turns=5, decay=0.9)
    turns = play(env, ["#### 0", "#### 0", "#### 0", "#### 7"])
    assert turns[-1][0] and turns[-1][1] == pytest.approx(0.9**3)
    assert compute_refine_reward(1, 0.5) == 1.0
    assert compute_refine_reward(3, 0.5) == 0.25


def test_episode_is_over_after_done() -> None:
    episode = SelfRefineEnv([TASK], max_turns=1).episode(TASK)
    assert episode.respond("#### 3").done
    with pytest.raises(RuntimeError):
        episode.respond("#### 7")


def test_feedback_without_numbers_is_plain() -> None:
    assert render_feedback("#### seven", "7") == TRY_AGAIN
    assert render_feedback("#### Ostrand", "Velmora") == TRY_AGAIN
    assert render_feedback("no mark", "7") == NO_ANSWER
    word = EnvTask(task_id="w", prompt="Name the river.", answer="Velmora", source="test")
    episode = SelfRefineEnv([word], grader="exact_match").episode(word)
    assert episode.respond("#### Ostrand").observation == TRY_AGAIN
    assert episode.respond("#### velmora").reward == 0.5


@pytest.mark.parametrize(("kwargs", "message"), [({"max_turns": 0}, "max_turns"), ({"decay": 1.5}, "decay")])
def test_rejects_bad_settings(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SelfRefineEnv([TASK], **kwargs)  # type: ignore[arg-type]
