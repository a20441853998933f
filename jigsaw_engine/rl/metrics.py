"""Names of the per-step training metrics, and the helpers that fill them.

The names follow verl's where verl has one, so dashboards and comparisons built for verl runs read
ours unchanged. Every helper returns plain ``dict[str, float]``: the training loop merges them into
one step record without touching torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, get_args

import torch
from torch import Tensor

from jigsaw_engine.rl.policy_loss import PolicyLossOutput, ValueLossOutput

PG_LOSS: Final = "actor/pg_loss"
PG_CLIPFRAC: Final = "actor/pg_clipfrac"
PG_CLIPFRAC_LOWER: Final = "actor/pg_clipfrac_lower"
PPO_KL: Final = "actor/ppo_kl"
ENTROPY: Final = "actor/entropy"
KL_LOSS: Final = "actor/kl_loss"
KL_COEF: Final = "actor/kl_coef"
GRAD_NORM: Final = "actor/grad_norm"
LR: Final = "actor/lr"
BEHAV_IMP_WEIGHT: Final = "actor/behav_imp_weight"
"""Asynchronous jobs: mean ``pi_prox / pi_behav`` of the tokens the decoupled loss kept."""
BEHAV_CAPPED_FRAC: Final = "actor/behav_capped_frac"
"""Asynchronous jobs: share of tokens the decoupled loss left out, their weight past its cap."""
POLICY_LAG_MEAN: Final = "rollout/policy_lag_mean"
"""Asynchronous jobs: updates between the policy that generated an episode and the one it trains (mean)."""
POLICY_LAG_MAX: Final = "rollout/policy_lag_max"

VF_LOSS: Final = "critic/vf_loss"
VF_CLIPFRAC: Final = "critic/vf_clipfrac"
SCORE_MEAN: Final = "critic/score/mean"
REWARD_FAILURES: Final = "critic/score/failed"
"""Episodes of the step whose reward failed (an installed reward raised, timed out or returned
no number) and scored the failure's score instead; the samples say why."""
REWARDS_MEAN: Final = "critic/rewards/mean"
ADVANTAGES_MEAN: Final = "critic/advantages/mean"
ADVANTAGES_MAX: Final = "critic/advantages/max"
ADVANTAGES_MIN: Final = "critic/advantages/min"

RESPONSE_LENGTH_MEAN: Final = "response_length/mean"
RESPONSE_LENGTH_MAX: Final = "response_length/max"
RESPONSE_LENGTH_CLIP_RATIO: Final = "response_length/clip_ratio"
PROMPT_LENGTH_MEAN: Final = "prompt_length/mean"

TimedStage = Literal["gen", "old_log_prob", "ref", "adv", "update_actor", "sync", "step"]
TIMED_STAGES: tuple[TimedStage, ...] = get_args(TimedStage)
TIMING_PREFIX: Final = "timing_s/"

ROLLOUT_MEMORY_RELEASED: Final = "perf/rollout_memory_released"
"""Share of a colocated job's rollout engines that gave their device memory back while it trained."""
THROUGHPUT: Final = "perf/throughput"
TOTAL_NUM_TOKENS: Final = "perf/total_num_tokens"


def timing_key(stage: TimedStage) -> str:
    """``timing_s/<stage>``: wall seconds the step spent in ``stage``."""
    if stage not in TIMED_STAGES:
        raise ValueError(f"stage: unknown timed stage {stage!r}; use one of {', '.join(TIMED_STAGES)}")
    return TIMING_PREFIX + stage


def compute_data_metrics(
    *,
    scores: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    prompt_lengths: Tensor,
    max_response_length: int,
    rewards: Tensor | None = None,
    truncated: Tensor | None = None,
) -> dict[str, float]:
    """Score, reward, advantage and length statistics of one step's batch.

    ``scores`` and ``rewards`` are per response (``rewards`` after any KL penalty; defaults to the
    scores); ``advantages`` is ``[batch, seq_len]`` and its statistics cover the valid tokens only.
    A response counts as clipped when it reached ``max_response_length``, or, given ``truncated``
    (per response), when that says so: a multi-turn response whose every reply has its own limit
    may be longer than one reply's limit without any reply having been cut.
    """
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask: expected [batch, seq_len], got shape {tuple(response_mask.shape)}")
    batch = response_mask.shape[0]
    per_response = {"scores": scores, "prompt_lengths": prompt_lengths, "rewards": rewards, "truncated": truncated}
    for name, values in per_response.items():
        if values is not None and values.shape != (batch,):
            raise ValueError(f"{name}: expected shape ({batch},), one value per response, got {tuple(values.shape)}")
    if advantages.shape != response_mask.shape:
        raise ValueError(
            f"advantages: shape {tuple(advantages.shape)} does not match response_mask {tuple(response_mask.shape)}; "
            "pass token-level advantages"
        )
    if max_response_length <= 0:
        raise ValueError(f"max_response_length: must be positive, got {max_response_length}")
    if batch == 0:
        raise ValueError("response_mask: the batch is empty; metrics need at least one response")

    valid = response_mask > 0
    valid_adv = advantages.detach().to(torch.float64)[valid]
    response_lengths = valid.sum(dim=-1).to(torch.float64)
    reward_source = scores if rewards is None else rewards
    clipped = response_lengths >= max_response_length if truncated is None else truncated.bool()
    return {
        SCORE_MEAN: float(scores.detach().to(torch.float64).mean()),
        REWARDS_MEAN: float(reward_source.detach().to(torch.float64).mean()),
        ADVANTAGES_MEAN: float(valid_adv.mean()) if valid_adv.numel() else 0.0,
        ADVANTAGES_MAX: float(valid_adv.max()) if valid_adv.numel() else 0.0,
        ADVANTAGES_MIN: float(valid_adv.min()) if valid_adv.numel() else 0.0,
        RESPONSE_LENGTH_MEAN: float(response_lengths.mean()),
        RESPONSE_LENGTH_MAX: float(response_lengths.max()),
        RESPONSE_LENGTH_CLIP_RATIO: float(clipped.to(torch.float64).mean()),
        PROMPT_LENGTH_MEAN: float(prompt_lengths.to(torch.float64).mean()),
    }


def compute_actor_metrics(
    policy: PolicyLossOutput,
    *,
    entropy: Tensor | float | None = None,
    kl_loss: Tensor | float | None = None,
    kl_coef: float | None = None,
    grad_norm: Tensor | float | None = None,
    lr: float | None = None,
) -> dict[str, float]:
    """The actor's update metrics; the optional ones appear only when given."""
    metrics = {
        PG_LOSS: float(policy.pg_loss.detach()),
        PG_CLIPFRAC: float(policy.pg_clipfrac),
        PG_CLIPFRAC_LOWER: float(policy.pg_clipfrac_lower),
        PPO_KL: float(policy.ppo_kl),
    }
    optional: tuple[tuple[str, Tensor | float | None], ...] = (
        (ENTROPY, entropy),
        (KL_LOSS, kl_loss),
        (KL_COEF, kl_coef),
        (GRAD_NORM, grad_norm),
        (LR, lr),
    )
    for name, value in optional:
        if value is not None:
            metrics[name] = float(value.detach()) if isinstance(value, Tensor) else float(value)
    return metrics


def compute_critic_metrics(value: ValueLossOutput) -> dict[str, float]:
    return {VF_LOSS: float(value.vf_loss.detach()), VF_CLIPFRAC: float(value.vf_clipfrac)}


def compute_timing_metrics(seconds_by_stage: Mapping[TimedStage, float]) -> dict[str, float]:
    """``timing_s/<stage>`` for every stage timed this step."""
    return {timing_key(stage): float(seconds) for stage, seconds in seconds_by_stage.items()}


def compute_throughput_metrics(*, total_num_tokens: int, step_seconds: float, num_devices: int = 1) -> dict[str, float]:
    """Tokens (prompt + response) processed this step, and tokens per second per device."""
    if step_seconds <= 0.0:
        raise ValueError(f"step_seconds: must be positive, got {step_seconds}; pass the step's wall time")
    if num_devices <= 0:
        raise ValueError(f"num_devices: must be positive, got {num_devices}; pass the devices the step ran on")
    return {
        TOTAL_NUM_TOKENS: float(total_num_tokens),
        THROUGHPUT: total_num_tokens / (step_seconds * num_devices),
    }
