"""A tiny policy that is ready for RL: a tokenizer trained on the task, a preset model, a warm-up.

The tokenizer's corpus is the task's own text (prompts, ideal replies, and any extra text such
as an environment's feedback), so every token the episode will contain is cheap to encode.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerFast

from jigsaw_engine.envs.protocol import Environment, EnvTask
from jigsaw_engine.models.chat import ChatFormat, render_reply, render_turn
from jigsaw_engine.models.loading import build_tiny_model, load_policy, save_policy
from jigsaw_engine.models.presets import tiny_preset
from jigsaw_engine.models.tokenizer_build import build_tokenizer
from jigsaw_engine.train.sft import WarmupConfig, supervised_warmup
from jigsaw_engine.train.token_batch import Sample


def ideal_replies(env: Environment, task: EnvTask) -> list[str]:
    """What a good policy writes, turn by turn: a search first where the env has a retriever,
    then GSM8K's final-answer line, which every grader accepts."""
    answer = f"#### {task.answer}"
    if env.name == "retrieval":
        question = task.prompt.split("\n", 1)[0]
        return [f"<search>{question}</search>", answer]
    return [answer]


def warmup_samples(env: Environment, tasks: Sequence[EnvTask], tokenizer: PreTrainedTokenizerFast) -> list[Sample]:
    """Ideal episodes played against ``env`` itself, so observations (a retriever's passages)
    are the real ones and the rendering is the rollout's."""
    chat = ChatFormat(tokenizer)
    samples = []
    for task in tasks:
        tokens = chat.prompt_ids(task.conversation())
        written = [False] * len(tokens)
        episode = env.episode(task)
        for reply in ideal_replies(env, task):
            reply_ids = chat.reply_ids(reply)
            tokens += reply_ids
            written += [True] * len(reply_ids)
            turn = episode.respond(reply)
            if turn.done:
                break
            observation = chat.observation_ids("tool" if turn.role == "tool" else "user", turn.observation)
            tokens += observation
            written += [False] * len(observation)
        samples.append(Sample(tuple(tokens), tuple(written)))
    return samples


def warm_start_tiny_policy(
    preset_name: str,
    env: Environment,
    *,
    warmup: WarmupConfig,
    extra_text: Iterable[str] = (),
    vocab_size: int = 512,
    cache_dir: Path | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast, list[float]]:
    """Build and warm up a tiny policy for ``env``'s tasks; the model, its tokenizer, the warm-up losses.

    With ``cache_dir``, the result is saved there under a key of everything that shapes it and
    loaded next time (losses are then empty): the benchmark builds the same start policy once
    per policy it compares, and every one of them must start from the same weights anyway.
    """
    tasks = list(env.dataset())
    corpus = [render_turn("user", t.prompt) + "".join(render_reply(r) for r in ideal_replies(env, t)) for t in tasks]
    extra = list(extra_text)
    folder = None
    if cache_dir is not None:
        key = hashlib.sha256(json.dumps([preset_name, vocab_size, asdict(warmup), corpus, extra]).encode()).hexdigest()
        folder = cache_dir / f"{preset_name}-{env.name}-{key[:16]}"
        if (folder / "config.json").is_file():
            policy = load_policy(folder)
            return policy.model, policy.tokenizer, []
    tokenizer = build_tokenizer([*corpus, *extra], vocab_size=vocab_size)
    model = build_tiny_model(tiny_preset(preset_name), tokenizer, seed=warmup.seed)
    samples = warmup_samples(env, tasks, tokenizer)
    losses = supervised_warmup(model, samples, warmup, pad_token_id=tokenizer.pad_token_id)
    if folder is not None:
        # Written aside and renamed: a concurrent builder of the same key never sees half a folder.
        staging = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}")
        save_policy(model, tokenizer, staging)
        try:
            staging.rename(folder)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another builder got there first
    return model, tokenizer, losses
