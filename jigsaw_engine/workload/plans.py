"""One sampled sequence of a step (its prompt, turns and tool waits), and the seeded random
stream each step of a pipeline draws from, whether its lengths are sampled or replayed."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SequencePlan:
    prompt_tokens: int
    turn_tokens: tuple[int, ...]
    """Generated tokens in each turn (sum capped at ``rollout.max_response_length``)."""
    tool_waits_s: tuple[float, ...]
    """Tool latency after each turn but the last."""
    tool_output_tokens: int

    @property
    def response_tokens(self) -> int:
        return sum(self.turn_tokens)

    @property
    def total_tokens(self) -> int:
        """Tokens the trainer sees: prompt, every turn, every tool output."""
        return self.prompt_tokens + self.response_tokens + self.tool_output_tokens * len(self.tool_waits_s)


def step_rng(seed: int, step: int) -> random.Random:
    """One independent, reproducible stream per (pipeline seed, step)."""
    return random.Random(seed * 1_000_003 + step)
