"""Multi-turn self-refinement: a wrong answer earns feedback and another try, at a discount.

The same verifiable math tasks as :mod:`math_tasks`, but an episode lasts up to ``max_turns``
replies. Feedback says ``too high`` / ``too low`` when both answers are numbers, so a policy can
learn to use it; the reward halves (by default) for each extra turn, so answering right the first
time still pays most.
"""

from __future__ import annotations

from collections.abc import Sequence

from jigsaw_engine.envs.graders import GraderName, extract_answer, get_grader, parse_number
from jigsaw_engine.envs.protocol import Environment, EnvTask, Episode, Turn
from jigsaw_engine.envs.reward import RewardError
from jigsaw_engine.envs.turns import TurnCounter

TRY_AGAIN = "Wrong, try again."
TOO_HIGH = "Wrong: too high. Try again."
TOO_LOW = "Wrong: too low. Try again."
NO_ANSWER = "No answer found; end your reply with #### <answer>. Try again."


def render_feedback(reply: str, reference: str) -> str:
    """What the env tells the model after a wrong ``reply``."""
    answer = extract_answer(reply)
    if answer is None:
        return NO_ANSWER
    got, expected = parse_number(answer), parse_number(reference)
    if got is None or expected is None:
        return TRY_AGAIN
    return TOO_HIGH if got > expected else TOO_LOW if got < expected else TRY_AGAIN


def compute_refine_reward(turn: int, decay: float) -> float:
    """The reward for a first correct answer on ``turn`` (1-based): ``decay ** (turn - 1)``."""
    return float(decay ** (turn - 1))


class SelfRefineEpisode(TurnCounter):
    def __init__(self, task: EnvTask, grader: GraderName, *, max_turns: int, decay: float) -> None:
        super().__init__(task, max_turns=max_turns)
        self._grade = get_grader(grader)
        self._decay = decay

    def respond(self, reply: str) -> Turn:
        turn = self._next_turn()
        try:
            score = self._grade(reply, self._task.answer)
        except RewardError as exc:
            return self._failed(exc)
        if score > 0:
            return self._finish(compute_refine_reward(turn, self._decay))
        if self._last_turn:
            return self._finish(0.0)
        return Turn(done=False, observation=render_feedback(reply, self._task.answer), role="user")


class SelfRefineEnv(Environment):
    """Math tasks with up to ``max_turns`` tries; reward ``decay ** (tries - 1)`` when one is right, else 0."""

    def __init__(
        self,
        tasks: Sequence[EnvTask],
        *,
        grader: GraderName = "numeric",
        max_turns: int = 3,
        decay: float = 0.5,
        name: str = "self_refine",
    ) -> None:
        if not tasks:
            raise ValueError(f"environment {name!r} has no tasks")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"decay must be within [0, 1], got {decay}")
        get_grader(grader)
        self.name = name
        self.max_turns = max_turns
        self.grader: GraderName = grader
        self.decay = decay
        self._tasks = tuple(tasks)

    def dataset(self) -> Sequence[EnvTask]:
        return self._tasks

    def episode(self, task: EnvTask) -> Episode:
        return SelfRefineEpisode(task, self.grader, max_turns=self.max_turns, decay=self.decay)
