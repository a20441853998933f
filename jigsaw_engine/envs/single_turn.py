"""The shared shape of one-reply environments: the model answers once and is graded.

Generated arithmetic, GSM8K files and users' JSONL differ only in where their rows come from,
so they share this environment and episode.
"""

from __future__ import annotations

from collections.abc import Sequence

from jigsaw_engine.envs.graders import GraderName, get_grader
from jigsaw_engine.envs.protocol import Environment, EnvTask, Episode, Turn
from jigsaw_engine.envs.reward import RewardError
from jigsaw_engine.envs.turns import TurnCounter


class SingleTurnEpisode(TurnCounter):
    """Grades the one reply; a second reply is a bug in the loop."""

    def __init__(self, task: EnvTask, grader: GraderName) -> None:
        super().__init__(task, max_turns=1)
        self._grade = get_grader(grader)

    def respond(self, reply: str) -> Turn:
        self._next_turn()
        try:
            return self._finish(self._grade(reply, self._task.answer))
        except RewardError as exc:
            return self._failed(exc)


class SingleTurnEnv(Environment):
    """A fixed list of tasks, one reply each, rewarded by ``grader``."""

    def __init__(self, tasks: Sequence[EnvTask], *, grader: GraderName, name: str) -> None:
        if not tasks:
            raise ValueError(f"environment {name!r} has no tasks")
        get_grader(grader)
        self.name = name
        self.max_turns = 1
        self.grader: GraderName = grader
        self._tasks = tuple(tasks)

    def dataset(self) -> Sequence[EnvTask]:
        return self._tasks

    def episode(self, task: EnvTask) -> Episode:
        return SingleTurnEpisode(task, self.grader)
