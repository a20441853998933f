"""Whole-step validation: ``simulate_step`` against published GRPO step times.

Run with ``-s`` to see the table (case, simulated s, published s, error %, generation share).
Only the published configuration goes in (model, devices, batch, group size, caps, tp, length
distribution); no cost constant is set per case. Each case averages steps 0-2 to damp the
sampling noise of one step's lengths.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from jigsaw_engine.sim.step_sim import simulate_step
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.workloads import WORKLOADS, WorkloadSpec
from tests.engine.builders import make_cost, make_spec

STEPS = (0, 1, 2)
STEP_TOLERANCE = 0.20


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: the cache key of simulate()
class Case:
    name: str
    device_type: str
    spec: dict[str, Any]
    workload: WorkloadSpec
    published_step_s: float
    published_gen_share: float | None


# verl, Qwen3-8B GRPO on 8 x H100: step about 245 s, generation about 30% of it (the figures
# this project's brief quotes; the page carrying these timings was not found in the searchable
# corpus, so they are taken to describe verl's stock recipe below).
# Configuration from verl's examples/grpo_trainer/run_qwen3-8b.sh
# (https://github.com/volcengine/verl/blob/main/examples/grpo_trainer/run_qwen3-8b.sh, read via
# its GB200 adaptation "based on run_qwen3-8b.sh" and a public reproduction of it): GSM8K,
# data.train_batch_size 1024, rollout.n 5, max_prompt_length 512, max_response_length 1024,
# vLLM rollout tensor_model_parallel_size 2, FSDP actor with a KL loss (so a reference forward).
# Assumption (no published length): Qwen3-8B answers in thinking mode by default and its GSM8K
# reasoning runs past 1k tokens, so the GSM8K shape (sigma 0.5, 160-token prompts) is kept with a
# median of 1200 tokens: about 60% of responses hit the 1024 cap, mean about 920. The check is not
# knife-edge on this: medians 700-1900 all land within 20% (700: -10%, 1400: +15%); the stock
# GSM8K median (280 tokens, instruct-style answers) gives about 120 s, half the published step.
VERL_QWEN3_8B = Case(
    name="verl Qwen3-8B GRPO 8xH100",
    device_type="h100",
    spec=make_spec(
        name="verl-qwen3-8b",
        model="qwen3-8b",
        workload="gsm8k",
        data={"train_batch_size": 1024},
        rollout={"n": 5, "max_response_length": 1024},
        resources={"num_gpus": 8, "tp": 2},
    ),
    workload=dataclasses.replace(WORKLOADS["gsm8k"], response_median_tokens=1200.0),
    published_step_s=245.0,
    published_gen_share=0.30,
)

# NeMo-RL v0.4, Llama-3.1-8B-Instruct GRPO on 16 x H100 (DGX-H100, BF16, Megatron training),
# on-policy: step 97.7 s. From the performance summary, https://docs.nvidia.com/nemo/rl/latest/
# about/performance-summary.html (docs/about/performance-summary.md in NVIDIA-NeMo/RL): dataset
# OpenMathInstruct-2, T-max sequence length 4096, G-average sequence length 1060, G-GBS 2048,
# generation [TP, PP] = [1, 1]. The recipe examples/configs/recipes/llm/performance/
# grpo-llama3.1-8b-instruct-2n8g.yaml gives the split: 64 prompts x 32 generations,
# max_new_tokens 4096 inside a 4096-token model length.
# Assumptions: "G-average sequence length" counts prompt plus response (as T-max does); prompts
# are about 200 tokens (the math workload's), so responses average 860 and the math shape
# (sigma 0.72) gets median 860 / exp(0.72**2 / 2) = 663. Reading 1060 as response-only instead
# gives about 100 s (+3%). The response cap is 4096 - 200 = 3896.
_NEMO_PROMPT_TOKENS = 200
_NEMO_MEAN_RESPONSE = 1060 - _NEMO_PROMPT_TOKENS
_MATH = WORKLOADS["math"]
NEMO_LLAMA_8B = Case(
    name="NeMo-RL Llama-3.1-8B GRPO 16xH100",
    device_type="h100",
    spec=make_spec(
        name="nemo-llama-3.1-8b",
        model="llama-3.1-8b",
        workload="math",
        data={"train_batch_size": 64},
        rollout={"n": 32, "max_response_length": 4096 - _NEMO_PROMPT_TOKENS},
        resources={"num_gpus": 16, "tp": 1},
    ),
    workload=dataclasses.replace(
        _MATH,
        prompt_tokens=_NEMO_PROMPT_TOKENS,
        response_median_tokens=_NEMO_MEAN_RESPONSE / math.exp(_MATH.response_sigma**2 / 2),
    ),
    published_step_s=97.7,
    published_gen_share=None,
)

CASES = (VERL_QWEN3_8B, NEMO_LLAMA_8B)


@dataclass(frozen=True, slots=True)
class Outcome:
    step_s: float
    gen_s: float
    mean_response_tokens: float

    @property
    def gen_share(self) -> float:
        return self.gen_s / self.step_s


@cache
def simulate(case: Case) -> Outcome:
    spec = dataclasses.replace(parse_pipeline_spec(case.spec), workload=case.workload)
    cost = make_cost(case.device_type)
    results = [simulate_step(cost, spec, step) for step in STEPS]
    lengths = [n for r in results for n in r.response_tokens]
    return Outcome(
        step_s=statistics.mean(r.duration_s for r in results),
        gen_s=statistics.mean(r.gen_s for r in results),
        mean_response_tokens=statistics.mean(lengths),
    )


def test_print_validation_table() -> None:
    print()
    print(f"{'case':<36} {'sim s':>8} {'pub s':>8} {'err %':>7} {'gen sim':>8} {'gen pub':>8} {'resp':>6}")
    for case in CASES:
        out = simulate(case)
        err = 100.0 * (out.step_s - case.published_step_s) / case.published_step_s
        pub_gen = f"{case.published_gen_share:.0%}" if case.published_gen_share is not None else "n/a"
        print(
            f"{case.name:<36} {out.step_s:>8.1f} {case.published_step_s:>8.1f} {err:>+7.1f} "
            f"{out.gen_share:>8.0%} {pub_gen:>8} {out.mean_response_tokens:>6.0f}"
        )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_step_time_within_20_percent_of_published(case: Case) -> None:
    out = simulate(case)
    assert out.step_s == pytest.approx(case.published_step_s, rel=STEP_TOLERANCE)


def test_verl_generation_share_is_about_30_percent() -> None:
    # Published: generation about 30% of the step; allow 10 points either side, because the
    # share moves with the assumed response lengths (see the case's comment).
    assert VERL_QWEN3_8B.published_gen_share is not None
    assert simulate(VERL_QWEN3_8B).gen_share == pytest.approx(VERL_QWEN3_8B.published_gen_share, abs=0.10)
