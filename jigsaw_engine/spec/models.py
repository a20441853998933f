"""Model catalogue: the architecture numbers the cost model needs, per known checkpoint.

Values are from each model's published ``config.json`` (parameters include embeddings).
A model not in the catalogue can be described from its own ``config.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jigsaw_engine.spec.checkpoints import CheckpointSource


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    num_params: float
    """Total parameters, embeddings included (drives weight bytes and FLOPs)."""
    num_layers: int
    hidden_size: int
    num_kv_heads: int
    head_dim: int
    source: CheckpointSource | None = None
    """Where a real checkpoint's files are; None for the catalogue's models and the tiny presets."""
    architecture: str | None = None
    """A checkpoint's architecture family (``qwen2``, ``qwen3``, ``llama``, ``mistral``)."""

    @property
    def is_checkpoint(self) -> bool:
        return self.source is not None

    @property
    def weight_bytes_bf16(self) -> float:
        return 2.0 * self.num_params

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V, every layer, bf16: the resident KV cost of one token of context."""
        return 2.0 * self.num_layers * self.num_kv_heads * self.head_dim * 2.0


def _m(name: str, params: float, layers: int, hidden: int, kv: int, hd: int = 128) -> ModelSpec:
    return ModelSpec(name, params, layers, hidden, kv, hd)


MODEL_CATALOGUE: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        _m("qwen2.5-1.5b", 1.54e9, 28, 1536, 2),
        _m("qwen2.5-3b", 3.09e9, 36, 2048, 2),
        _m("qwen2.5-7b", 7.62e9, 28, 3584, 4),
        _m("qwen2.5-14b", 14.7e9, 48, 5120, 8),
        _m("qwen2.5-32b", 32.5e9, 64, 5120, 8),
        _m("qwen3-0.6b", 0.60e9, 28, 1024, 8),
        _m("qwen3-4b", 4.02e9, 36, 2560, 8),
        _m("qwen3-8b", 8.19e9, 36, 4096, 8),
        _m("qwen3-32b", 32.8e9, 64, 5120, 8),
        _m("llama-3.1-8b", 8.03e9, 32, 4096, 8),
        _m("deepseek-r1-distill-qwen-14b", 14.8e9, 48, 5120, 8),
        # Tiny presets built locally (jigsaw_engine.models.presets) for real runs on a CPU.
        _m("tiny-qwen2-1m", 0.85e6, 4, 128, 2, 32),
        _m("tiny-llama-1m", 0.85e6, 4, 128, 2, 32),
        _m("tiny-qwen2-6m", 4.85e6, 6, 256, 4, 32),
    )
}


def model_from_hf_config(name: str, config: Mapping[str, Any]) -> ModelSpec:
    """Derive the cost-relevant numbers from an HF ``config.json`` (dense decoder models)."""
    hidden = int(config["hidden_size"])
    layers = int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads", heads))
    head_dim = int(config.get("head_dim") or hidden // heads)
    inter = int(config["intermediate_size"])
    vocab = int(config["vocab_size"])
    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * inter
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    params = layers * (attn + mlp) + embeddings
    return ModelSpec(name, float(params), layers, hidden, kv_heads, head_dim)
