"""How a conversation becomes text for the policy: one format for rollout, SFT and training.

Each message is ``<|role|>content``; a model's reply ends with ``<|endoftext|>``. The rollout
loop appends an environment's observation as ``<|user|>...`` or ``<|tool|>...`` followed by
``<|assistant|>``, so a multi-turn episode is one token sequence whose model-written spans
are the only ones trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Role = Literal["user", "assistant", "tool"]

PAD = "<|pad|>"
EOS = "<|endoftext|>"
ROLE_TOKENS: dict[Role, str] = {"user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"}
SPECIAL_TOKENS: tuple[str, ...] = (PAD, EOS, *ROLE_TOKENS.values())


def render_turn(role: Role, content: str) -> str:
    """A message other than the model's own, followed by the cue for the model to answer."""
    return f"{ROLE_TOKENS[role]}{content}{ROLE_TOKENS['assistant']}"


def render_prompt(messages: Sequence[tuple[Role, str]]) -> str:
    """A whole conversation up to the model's next reply (earlier replies end with EOS)."""
    parts: list[str] = []
    for role, content in messages:
        if role == "assistant":
            parts.append(f"{content}{EOS}")
        else:
            parts.append(render_turn(role, content))
    return "".join(parts)


def render_reply(reply: str) -> str:
    """What the model should write for ``reply``: the text, then EOS."""
    return f"{reply}{EOS}"
