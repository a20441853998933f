"""How a conversation becomes text for the policy: one format for rollout, SFT and training.

Each message is ``<|role|>content``; a model's reply ends with ``<|endoftext|>``. The rollout
loop appends an environment's observation as ``<|user|>...`` or ``<|tool|>...`` followed by
``<|assistant|>``, so a multi-turn episode is one token sequence whose model-written spans
are the only ones trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

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


PRESET_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}<|assistant|>{{ m['content'] }}<|endoftext|>"
    "{% else %}<|{{ m['role'] }}|>{{ m['content'] }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""The format above as a chat template: a tiny preset's tokenizer renders through it, so
presets and real checkpoints share one code path and a preset's tokens stay what they were."""

_PROBE = "\u2063probe\u2063"
"""Placeholder content for rendering a template around a turn (an invisible separator, so no
template trims or rewrites it)."""


class ChatTemplateError(ValueError):
    """A checkpoint's chat template cannot render the conversations an RL episode needs."""


class ChatFormat:
    """How one tokenizer's chat template turns an episode into token ids.

    An episode is one token sequence: the prompt (with the template's cue for the model to
    answer), the model's reply up to its end-of-turn token, the environment's observation with
    the cue again, and so on. The template renders whole conversations, so an observation's
    tokens are found as a difference: a probe conversation rendered with and without the new
    message, the shared prefix cut off. The text between the model's end-of-turn token and the
    next message (ChatML's newline) is kept with the observation, since the model stops at the
    end-of-turn token and never writes it.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.template: str = tokenizer.chat_template or PRESET_CHAT_TEMPLATE
        user_turn = self._render([("user", _PROBE)], generation_prompt=True)
        closed = self._render([("user", _PROBE), ("assistant", _PROBE)], generation_prompt=False)
        if not closed.startswith(user_turn) or _PROBE not in closed[len(user_turn) :]:
            raise ChatTemplateError("the chat template does not render an assistant reply after the prompt's cue")
        after_reply = closed[len(user_turn) :].split(_PROBE, 1)[1]
        end_of_turn_ids = self._encode(after_reply)
        if not end_of_turn_ids:
            raise ChatTemplateError("the chat template ends an assistant turn with nothing the model could stop at")
        self.end_of_turn_id = end_of_turn_ids[0]
        end_text = tokenizer.decode([self.end_of_turn_id])
        self._glue = after_reply.split(end_text, 1)[1] if end_text and end_text in after_reply else ""
        self._user_closed = self._render([("user", _PROBE)], generation_prompt=False)
        eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        self.stop_ids: tuple[int, ...] = tuple(sorted({self.end_of_turn_id, *eos}))

    def prompt_ids(self, messages: Sequence[tuple[str, str]]) -> list[int]:
        """The conversation before the model's first reply, ending with the cue to answer."""
        return self._encode(self._render(messages, generation_prompt=True))

    def observation_ids(self, role: str, content: str) -> list[int]:
        """What follows a reply the model ended with its end-of-turn token: the environment's
        message (``user`` feedback or a ``tool`` result) and the cue to answer again.

        The message is rendered after a closed user turn rather than an assistant one: some
        templates (Qwen3's) render an assistant turn differently once a later user message
        exists, while every template closes a user turn the way it closes an assistant one."""
        full = self._render([("user", _PROBE), (role, content)], generation_prompt=True)
        if not full.startswith(self._user_closed):
            raise ChatTemplateError(f"the chat template rewrites earlier turns when a {role!r} message follows")
        return self._encode(self._glue + full[len(self._user_closed) :])

    def reply_ids(self, reply: str) -> list[int]:
        """What the model should write for ``reply``: the text and the end-of-turn token."""
        return [*self._encode(reply), self.end_of_turn_id]

    def _render(self, messages: Sequence[tuple[str, str]], *, generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            [{"role": role, "content": content} for role, content in messages],
            chat_template=self.template,
            tokenize=False,
            add_generation_prompt=generation_prompt,
        )
        return str(text)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))
