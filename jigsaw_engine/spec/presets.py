"""Ready-made job specs for the dashboard's submit form and the demo (small, quick to run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    title: str
    spec: dict[str, Any]


PRESETS: tuple[Preset, ...] = (
    Preset(
        "math-grpo",
        "Single-turn math, GRPO (Qwen3-0.6B, GSM8K)",
        {
            "name": "gsm8k-grpo",
            "algorithm": "grpo",
            "model": "qwen3-0.6b",
            "workload": "gsm8k",
            "data": {"train_batch_size": 64},
            "rollout": {"n": 4, "max_response_length": 1024},
            "resources": {"num_gpus": 2},
            "trainer": {"total_steps": 20},
        },
    ),
    Preset(
        "self-refine",
        "Multi-turn self-refinement, GRPO (R1-Distill-Qwen-14B, AIME)",
        {
            "name": "aime-self-refine",
            "algorithm": "grpo",
            "model": "deepseek-r1-distill-qwen-14b",
            "workload": "aime_refine",
            "data": {"train_batch_size": 64},
            "rollout": {"n": 4, "max_response_length": 8192},
            "resources": {"num_gpus": 4, "tp": 2},
            "trainer": {"total_steps": 20},
        },
    ),
    Preset(
        "retrieval-qa",
        "Retrieval-augmented QA with a search tool, GRPO (Llama-3.1-8B, HotpotQA)",
        {
            "name": "hotpotqa-search",
            "algorithm": "grpo",
            "model": "llama-3.1-8b",
            "workload": "search",
            "data": {"train_batch_size": 64},
            "rollout": {"n": 4, "max_response_length": 4096},
            "resources": {"num_gpus": 2},
            "trainer": {"total_steps": 20},
        },
    ),
)
