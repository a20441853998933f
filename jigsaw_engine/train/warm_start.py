"""A tiny policy that is ready for RL: a tokenizer trained on the task, a preset model, a warm-up.

The tokenizer's corpus is the task's own text (prompts, ideal replies, and any extra text such
as an environment's feedback), so every token the episode will contain is cheap to encode.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from transformers import PreTrainedModel, PreTrainedTokenizerFast

from jigsaw_engine.envs.protocol import EnvTask
from jigsaw_engine.models.chat import render_reply, render_turn
from jigsaw_engine.models.loading import build_tiny_model
from jigsaw_engine.models.presets import tiny_preset
from jigsaw_engine.models.tokenizer_build import build_tokenizer
from jigsaw_engine.train.sft import WarmupConfig, supervised_warmup
from jigsaw_engine.train.token_batch import Sample


def ideal_reply(task: EnvTask) -> str:
    """The reply every grader accepts: GSM8K's final-answer line."""
    return f"#### {task.answer}"


def warmup_samples(tasks: Sequence[EnvTask], tokenizer: PreTrainedTokenizerFast) -> list[Sample]:
    samples = []
    for task in tasks:
        prompt = tokenizer.encode(render_turn("user", task.prompt))
        reply = tokenizer.encode(render_reply(ideal_reply(task)))
        samples.append(Sample(tuple(prompt + reply), (False,) * len(prompt) + (True,) * len(reply)))
    return samples


def warm_start_tiny_policy(
    preset_name: str,
    tasks: Sequence[EnvTask],
    *,
    warmup: WarmupConfig,
    extra_text: Iterable[str] = (),
    vocab_size: int = 512,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast, list[float]]:
    """Build and warm up a tiny policy for ``tasks``; the model, its tokenizer, the warm-up losses."""
    corpus = [render_turn("user", t.prompt) + render_reply(ideal_reply(t)) for t in tasks]
    tokenizer = build_tokenizer([*corpus, *extra_text], vocab_size=vocab_size)
    model = build_tiny_model(tiny_preset(preset_name), tokenizer, seed=warmup.seed)
    losses = supervised_warmup(model, warmup_samples(tasks, tokenizer), warmup, pad_token_id=tokenizer.pad_token_id)
    return model, tokenizer, losses
