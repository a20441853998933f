"""Tiny model presets: real HF architectures (Qwen2, Llama) at a few million parameters.

They exist so RL learning is real and testable on a CPU: a 1M-parameter model generates a
batch of short replies in a fraction of a second and trains a step in well under one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Architecture = Literal["qwen2", "llama"]


@dataclass(frozen=True, slots=True)
class TinyPreset:
    name: str
    architecture: Architecture
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    max_positions: int = 256
    """Longest sequence (prompt + every turn); tiny tasks stay well under it."""


TINY_PRESETS: dict[str, TinyPreset] = {
    p.name: p
    for p in (
        TinyPreset(
            "tiny-qwen2-1m", "qwen2", hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=384
        ),
        TinyPreset(
            "tiny-llama-1m", "llama", hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=384
        ),
        TinyPreset(
            "tiny-qwen2-6m", "qwen2", hidden_size=256, num_layers=6, num_heads=8, num_kv_heads=4, intermediate_size=768
        ),
    )
}


def tiny_preset(name: str) -> TinyPreset:
    try:
        return TINY_PRESETS[name]
    except KeyError:
        known = ", ".join(sorted(TINY_PRESETS))
        raise ValueError(f"model: unknown tiny preset {name!r}; known: {known}") from None
