"""What an operator's reward function is: the object a ``jigsawrl.rewards`` entry point names.

An operator installs a Python package whose entry point (group ``jigsawrl.rewards``, the entry
point's name being the reward's) names either a :class:`Reward` or a plain function
``score(reply, reference) -> float``; tenants then choose it by name in a spec's
``data.grader``. ``docs/rewards.md`` is the operator's guide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ENTRY_POINT_GROUP = "jigsawrl.rewards"

DEFAULT_TIME_LIMIT_S = 5.0
"""Wall time an installed reward may take per reply when it does not declare its own."""
MAX_TIME_LIMIT_S = 60.0
"""The most a reward may declare: a step waits for its slowest reply."""
FAILED_SCORE = 0.0
"""What a reply earns when its reward fails (raises, runs past its limit, returns no number)."""

Score = Callable[[str, str], float]
"""``score(reply, reference) -> reward``: the model's whole reply, the dataset row's reference answer."""


class RewardError(Exception):
    """An installed reward failed on one reply; the message says how (the sample shows it)."""


@dataclass(frozen=True, slots=True)
class Reward:
    """A reward function with what a tenant needs to choose it."""

    score: Score
    description: str
    """One line: what earns reward."""
    suits: str = "single-turn tasks with a reference answer"
    """Which tasks and datasets it is meant for (``GET /api/v1/rewards`` shows it)."""
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    """Per reply; past it the reply earns :data:`FAILED_SCORE` and its process is replaced."""

    def __post_init__(self) -> None:
        if not callable(self.score):
            raise TypeError(f"Reward.score must be callable, got {type(self.score).__name__}")
        if not 0 < self.time_limit_s <= MAX_TIME_LIMIT_S:
            raise ValueError(f"Reward.time_limit_s must be in (0, {MAX_TIME_LIMIT_S:g}], got {self.time_limit_s!r}")
