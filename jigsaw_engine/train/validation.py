"""Validation during a real run, as verl does it: every reply of the validation set graded by
the job's reward, reported per data source as ``val-core/<data_source>/reward/mean@<n>``.

verl validates before the first step when ``trainer.val_before_train`` is true (logged at step
0), then after every ``test_freq``-th step and after the last one; :meth:`ValidationPlan.due_after`
is that schedule. The replies themselves are kept (:class:`ValidationResult`) so what was graded
can be read back and re-graded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw_engine.envs.protocol import Environment
from jigsaw_engine.train.episodes import EpisodeResult

UNKNOWN_DATA_SOURCE = "unknown"
"""verl's name for rows that give no ``data_source``."""

TESTING_TIME = "timing_s/testing"
"""verl's name for the seconds a validation pass took."""


@dataclass(frozen=True, slots=True)
class ValidationPlan:
    env: Environment
    """The validation set (``data.val_files``) with the job's grader."""
    n: int
    """Replies per prompt (``rollout.val_kwargs.n``)."""
    temperature: float
    """0 is greedy (``val_kwargs.do_sample: false``)."""
    test_freq: int
    """Every this many steps, and at the last; -1: only before training."""
    before_train: bool
    total_steps: int

    def due_after(self, steps_done: int) -> bool:
        """Whether a pass follows the step that brought the job to ``steps_done`` steps."""
        if self.test_freq <= 0:
            return False
        return steps_done % self.test_freq == 0 or steps_done >= self.total_steps


@dataclass(frozen=True, slots=True)
class ValidationReply:
    """One graded reply, as a person (or a test) re-grading it reads it."""

    data_source: str
    prompt: str
    completion: str
    answer: str
    reward: float


@dataclass(frozen=True, slots=True)
class ValidationResult:
    steps_done: int
    """The policy validated had trained this many steps (0: before training)."""
    metrics: dict[str, float]
    replies: list[ValidationReply]


def data_source_of(episode: EpisodeResult) -> str:
    return episode.task.data_source or UNKNOWN_DATA_SOURCE


def validation_metrics(episodes: Sequence[EpisodeResult], n: int) -> dict[str, float]:
    """``val-core/<data_source>/reward/mean@<n>``: the mean reward of every reply of every
    prompt from that source (verl's core validation metric)."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        rewards[data_source_of(episode)].append(float(episode.reward))
    return {f"val-core/{source}/reward/mean@{n}": sum(values) / len(values) for source, values in rewards.items()}
