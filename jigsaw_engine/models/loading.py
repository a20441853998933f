"""Build a tiny checkpoint from a preset, and load any HF causal LM from a local directory.

A checkpoint directory is what ``save_pretrained`` writes (``config.json``, safetensors,
``tokenizer.json``), so a tiny model and a real one load through the same function, and vLLM
can serve either from the same path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from jigsaw_engine.errors import JigsawError
from jigsaw_engine.models.chat import PRESET_CHAT_TEMPLATE
from jigsaw_engine.models.compute import resolve_compute_device
from jigsaw_engine.models.presets import TinyPreset


class ModelLoadError(JigsawError):
    code = "model_load_error"


@dataclass(frozen=True, slots=True)
class Policy:
    """A causal LM and its tokenizer, as the rollout engine and the trainer both need them."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerFast
    path: Path


def build_tiny_model(preset: TinyPreset, tokenizer: PreTrainedTokenizerFast, *, seed: int = 0) -> PreTrainedModel:
    """Fresh random weights for ``preset``, sized to ``tokenizer``'s vocabulary."""
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=preset.hidden_size,
        num_hidden_layers=preset.num_layers,
        num_attention_heads=preset.num_heads,
        num_key_value_heads=preset.num_kv_heads,
        intermediate_size=preset.intermediate_size,
        max_position_embeddings=preset.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model: PreTrainedModel
    if preset.architecture == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    return model.to(torch.float32)


def save_policy(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


CHAT_TEMPLATE_FILE = "chat_template.jinja"
EXPORT_SHARD_SIZE = "5GB"
"""Weight files of an exported policy are cut at this size, as checkpoints on the hub are."""


def export_policy(
    model: PreTrainedModel, weights: Mapping[str, torch.Tensor], tokenizer: PreTrainedTokenizerFast, path: Path
) -> Path:
    """Write ``weights`` (``model``'s names, e.g. a trainer's state) as a Hugging Face directory
    in ``save_pretrained``'s layout: config, safetensors, tokenizer and its chat template, so
    that ``AutoModelForCausalLM`` and ``AutoTokenizer`` load it anywhere. A tokenizer without a
    template gets the one a tiny preset's prompts were rendered with."""
    from transformers.utils import logging as hf_logging

    path.mkdir(parents=True, exist_ok=True)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one bar per checkpoint would fill the job's log
    try:
        model.save_pretrained(path, state_dict=dict(weights), safe_serialization=True, max_shard_size=EXPORT_SHARD_SIZE)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    tokenizer.save_pretrained(path)
    if tokenizer.chat_template is None:  # written beside it, as save_pretrained writes a template
        (path / CHAT_TEMPLATE_FILE).write_text(PRESET_CHAT_TEMPLATE)
    return path


def load_policy(path: Path) -> Policy:
    """Load a causal LM and its tokenizer from ``path``; never touches the network."""
    missing = [name for name in ("config.json", "tokenizer.json") if not (path / name).is_file()]
    if not path.is_dir() or missing:
        what = "it is not a directory" if not path.is_dir() else f"missing {', '.join(missing)}"
        raise ModelLoadError(
            f"model path {path}: {what}; point it at a directory written by save_pretrained "
            "(config.json, *.safetensors, tokenizer.json), or use a tiny preset"
        )
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=training_dtype())
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token_id is None:
        # Llama 3's tokenizer has no pad token; padding is masked out, so EOS serves (verl does the same).
        tokenizer.pad_token = tokenizer.eos_token
    return Policy(model=model, tokenizer=tokenizer, path=path)


def training_dtype() -> torch.dtype:
    """bf16 where the device computes in it (a GPU that supports it), else float32: CPU
    kernels for bf16 matmuls are slower than float32 ones on most cores."""
    return resolve_compute_device().autocast_dtype or torch.float32


def weights_digest(weights: Mapping[str, torch.Tensor]) -> str:
    """A SHA-256 of named weights (names, dtypes and bytes, in name order): equal digests, equal
    weights, in whichever process each side holds them."""
    digest = hashlib.sha256()
    for name, tensor in sorted(weights.items()):
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}:{flat.dtype}:".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
