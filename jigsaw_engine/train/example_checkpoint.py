"""A small real-architecture checkpoint, written the way a user's own model arrives.

It is what a tenant brings (a Hugging Face directory: ``config.json``, safetensors, a tokenizer
with its chat template, ``generation_config.json``), only a few million parameters so that it
trains on a CPU: a Qwen3 decoder (or a Llama one), a byte-level BPE tokenizer trained on the task's text with
ChatML's special tokens and a ChatML chat template, and a short supervised warm-up on ideal
arithmetic replies so that RL has something to improve (a random model never writes an answer
and earns no reward to learn from). A job names it by path like any checkpoint; nothing in the
engine knows it was made here.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic
from jigsaw_engine.models.chat import ChatFormat
from jigsaw_engine.models.tokenizer_build import build_tokenizer
from jigsaw_engine.train.sft import WarmupConfig, supervised_warmup
from jigsaw_engine.train.warm_start import ideal_replies, warmup_samples

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML, as Qwen's instruct models render conversations (without their default system prompt)."""

CHATML_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True, slots=True)
class ExampleCheckpoint:
    """What shapes the checkpoint; the folder records it so a rebuild can be skipped."""

    architecture: Literal["qwen3", "llama"] = "qwen3"
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    max_positions: int = 512
    vocab_size: int = 600
    tasks: int = 400
    max_operand: int = 9
    warmup_steps: int = 90
    seed: int = 0


def build_example_checkpoint(folder: Path, shape: ExampleCheckpoint = ExampleCheckpoint()) -> Path:
    """Write the checkpoint to ``folder`` (kept when it was built with the same shape)."""
    recipe = json.dumps({"recipe": "example-checkpoint/1", **_fields(shape)}, sort_keys=True)
    marker = folder / "jigsaw_recipe.json"
    if marker.is_file() and marker.read_text(encoding="utf-8") == recipe:
        return folder
    env = MathEnv(generate_arithmetic(shape.seed, shape.tasks, max_operand=shape.max_operand))
    tasks = list(env.dataset())
    corpus = [f"user\n{t.prompt}\nassistant\n{' '.join(ideal_replies(env, t))}\n" for t in tasks]
    tokenizer = build_tokenizer(
        corpus, vocab_size=shape.vocab_size, special_tokens=CHATML_SPECIALS, pad="<|endoftext|>", eos="<|im_end|>"
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    end_of_turn = ChatFormat(tokenizer).end_of_turn_id
    config_class = Qwen3Config if shape.architecture == "qwen3" else LlamaConfig
    config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        head_dim=shape.hidden_size // shape.num_heads,
        intermediate_size=shape.intermediate_size,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=end_of_turn,
        bos_token_id=None,
    )
    torch.manual_seed(shape.seed)
    model_class = Qwen3ForCausalLM if shape.architecture == "qwen3" else LlamaForCausalLM
    model = model_class(config).to(torch.float32)
    warmup = WarmupConfig(steps=shape.warmup_steps, batch_size=32, seed=shape.seed)
    supervised_warmup(model, warmup_samples(env, tasks, tokenizer), warmup, pad_token_id=tokenizer.pad_token_id)
    staging = folder.with_name(f".{folder.name}.building")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.generation_config = GenerationConfig(eos_token_id=end_of_turn, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    (staging / "jigsaw_recipe.json").write_text(recipe, encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


def _fields(shape: ExampleCheckpoint) -> dict[str, int | str]:
    return {name: getattr(shape, name) for name in shape.__dataclass_fields__}
