"""Shared tiny policies: built once per test session (a few seconds each), copied per test."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch

from jigsaw_engine.envs.math_tasks import MathEnv, generate_arithmetic
from jigsaw_engine.envs.protocol import EnvTask
from jigsaw_engine.train.sft import WarmupConfig
from jigsaw_engine.train.warm_start import warm_start_tiny_policy

ARITH_TASKS: list[EnvTask] = [
    EnvTask(f"add-{a}-{b}", f"Compute {a}+{b}.", str(a + b), f"test:{a}+{b}") for a in range(10) for b in range(10)
]


@dataclass(frozen=True)
class TinyPolicy:
    model: torch.nn.Module
    tokenizer: object
    warmup_losses: list[float]

    def fresh_model(self) -> torch.nn.Module:
        return copy.deepcopy(self.model)


@pytest.fixture(scope="session")
def arith_policy() -> TinyPolicy:
    """A 1M-parameter Qwen2 warmed up on single-digit addition until it samples right ~25% of the time."""
    torch.set_num_threads(2)
    model, tokenizer, losses = warm_start_tiny_policy(
        "tiny-qwen2-1m",
        ARITH_TASKS,
        warmup=WarmupConfig(steps=90, batch_size=32, lr=3e-3, seed=0),
        extra_text=["Wrong: too high. Try again.", "Wrong: too low. Try again.", "Wrong, try again."],
    )
    return TinyPolicy(model, tokenizer, losses)


@pytest.fixture()
def arith_env() -> MathEnv:
    return MathEnv(ARITH_TASKS)


__all__ = ["ARITH_TASKS", "TinyPolicy", "generate_arithmetic"]
