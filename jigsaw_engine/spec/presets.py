"""Ready-made job specs for the dashboard's submit form and the demo (small, quick to run)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
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


def _tiny(
    name: str, workload: str, *, algorithm: str = "grpo", batch: int = 16, n: int = 8, tokens: int = 8
) -> dict[str, Any]:
    return {
        "name": name,
        "algorithm": algorithm,
        "model": "tiny-qwen2-1m",
        "workload": workload,
        "data": {"train_batch_size": batch},
        "rollout": {"n": n, "max_response_length": tokens},
        "resources": {"num_gpus": 1},
        "trainer": {"total_steps": 30},
    }


REAL_PRESETS: tuple[Preset, ...] = (
    Preset("math-grpo", "Single-turn arithmetic, GRPO (tiny Qwen2, trained for real)", _tiny("arith-grpo", "gsm8k")),
    Preset(
        "self-refine",
        "Multi-turn self-refinement, RLOO (tiny Qwen2, trained for real)",
        _tiny("refine-rloo", "aime_refine", algorithm="rloo"),
    ),
    Preset(
        "retrieval-qa",
        "Retrieval QA with a BM25 tool, GRPO (tiny Qwen2, trained for real)",
        _tiny("search-grpo", "search", batch=8, n=4, tokens=24),
    ),
)
"""The same three kinds of job, sized for real training on this machine's cores."""


def checkpoint_presets(model_roots: Sequence[str]) -> list[Preset]:
    """A ready-made job for each checkpoint found directly under ``model_roots`` (a folder with a
    ``config.json``), so the submit form offers the models the service was given, by path."""
    found: list[Preset] = []
    for root in model_roots:
        folder = Path(root).expanduser()
        if not folder.is_dir():
            continue
        for candidate in sorted(folder.iterdir()):
            if (candidate / "config.json").is_file():
                spec = {**_tiny(f"{candidate.name}-grpo", "gsm8k"), "model": {"path": str(candidate.resolve())}}
                found.append(
                    Preset(f"checkpoint-{candidate.name}", f"Arithmetic, GRPO ({candidate.name}, by path)", spec)
                )
    return found
