"""The bookkeeping every episode shares: count the replies, end once, refuse a reply after the end."""

from __future__ import annotations

from jigsaw_engine.envs.protocol import EnvTask, Turn
from jigsaw_engine.envs.reward import FAILED_SCORE, RewardError


class TurnCounter:
    """Base of the episodes: ``_next_turn`` at the top of ``respond``, ``_finish`` to end."""

    def __init__(self, task: EnvTask, *, max_turns: int) -> None:
        self._task = task
        self._max_turns = max_turns
        self._turns = 0
        self._done = False

    def _next_turn(self) -> int:
        """Count one more reply; a reply after the episode ended is a bug in the rollout loop."""
        if self._done:
            raise RuntimeError(
                f"episode on task {self._task.task_id} is over; it takes at most {self._max_turns} replies"
            )
        self._turns += 1
        return self._turns

    @property
    def _last_turn(self) -> bool:
        return self._turns >= self._max_turns

    def _finish(self, reward: float) -> Turn:
        self._done = True
        return Turn(done=True, reward=reward)

    def _failed(self, error: RewardError) -> Turn:
        """The reward failed on this reply: the episode ends with :data:`FAILED_SCORE` and says why."""
        self._done = True
        return Turn(done=True, reward=FAILED_SCORE, reward_error=str(error))
