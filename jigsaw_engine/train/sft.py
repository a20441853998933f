"""Supervised warm-up: a short phase of next-token training on ideal replies.

RL needs a policy that sometimes succeeds: a random tiny model never writes ``#### 7`` and its
rewards are all zero, so every group advantage is zero too. A few dozen steps on the ideal
replies teach the format (and some of the task); RL then has signal to work with.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from jigsaw_engine.train.token_batch import Sample, collate, forward_log_probs


@dataclass(frozen=True, slots=True)
class WarmupConfig:
    steps: int = 60
    """Optimizer steps; a format-only warm-up of a tiny model needs tens, not thousands."""
    batch_size: int = 32
    lr: float = 3e-3
    """High for a 1M-parameter model; a real checkpoint wants 1e-5."""
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")


def supervised_warmup(
    model: PreTrainedModel, samples: Sequence[Sample], config: WarmupConfig, *, pad_token_id: int
) -> list[float]:
    """Train ``model`` in place on ``samples``' model-written tokens; the loss of each step."""
    if not samples:
        raise ValueError("samples: the warm-up needs at least one example")
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    model.train()
    losses: list[float] = []
    for _ in range(config.steps):
        batch = collate(rng.choices(samples, k=config.batch_size), pad_token_id=pad_token_id)
        logp, _ = forward_log_probs(model, batch)
        loss = -(logp * batch.response_mask).sum() / batch.response_mask.sum().clamp(min=1.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
