"""What an RL environment gives the rollout loop: tasks, then turn-by-turn replies and a reward.

An environment is plain Python (no torch): it owns a dataset of :class:`EnvTask` rows, and for
each sampled row it starts an :class:`Episode` that reads the model's replies and answers with
the next observation (feedback, a tool's result) or, at the end, a reward. The rollout loop
renders the conversation for the model; the environment only sees and returns text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class EnvTask:
    """One dataset row: the first user message and what a correct answer looks like."""

    task_id: str
    prompt: str
    """The first user message, as the model sees it."""
    answer: str
    """The reference answer, as the grader compares it (``"42"``, not ``"#### 42"``)."""
    source: str
    """Where the row came from: ``path:line`` for a file, the generator's name and seed otherwise."""
    messages: tuple[tuple[str, str], ...] = ()
    """The conversation before the model's first reply as ``(role, content)`` pairs (roles
    ``system``, ``user``, ``assistant``) when the dataset gives one; ``prompt`` then holds the last
    user message. Empty: the conversation is the single user message ``prompt``."""
    data_source: str = ""
    """The dataset a row came from (verl's ``data_source``): per-source metrics are named by it."""

    def conversation(self) -> tuple[tuple[str, str], ...]:
        """What the model sees before its first reply, as ``(role, content)`` pairs."""
        return self.messages or (("user", self.prompt),)


@dataclass(frozen=True, slots=True)
class Turn:
    """The environment's answer to one model reply."""

    done: bool
    reward: float = 0.0
    """The episode's reward; only meaningful when ``done``."""
    observation: str = ""
    """When not done: the next message the model sees (feedback, a tool's result)."""
    role: str = "user"
    """Who speaks ``observation``: ``user`` (feedback) or ``tool`` (a tool's result)."""
    tool_s: float = 0.0
    """Wall time this turn spent in a tool (a retriever call): a real wait, reported as such."""
    reward_error: str = ""
    """Why the reward could not score the reply (an installed reward raised, ran past its time
    limit, returned no number); ``reward`` is then the failure's score. Empty: it scored."""


class Episode(Protocol):
    def respond(self, reply: str) -> Turn:
        """Read the model's reply to the last message; say what happens next."""


class Environment(Protocol):
    name: str
    max_turns: int
    """Model replies per episode at most; the loop ends an episode that reaches it with reward 0."""

    def dataset(self) -> Sequence[EnvTask]:
        """Every row, in a fixed order (the loop keeps a cursor into it for resume)."""

    def episode(self, task: EnvTask) -> Episode:
        """Start one episode on ``task``; episodes of one task are independent."""
