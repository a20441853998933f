"""Advantage estimators: how much better a response (or a token) did than a baseline.

The outcome estimators (GRPO, RLOO, REINFORCE++ and its group-baseline variant) start from one
score per response; GAE starts from per-token rewards and a critic's values. All of them take
``response_mask: [batch, seq_len]`` and return ``[batch, seq_len]`` advantages that are zero on
padding, so the policy loss never needs to know which estimator produced them.

A group is the set of responses to one prompt, named by ``group_ids: [batch]`` (any integers;
members need not be adjacent). A group of one has no baseline to compare with: its advantage is 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

AdvantageEstimator = Literal["grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "gae"]
ADVANTAGE_ESTIMATORS: tuple[AdvantageEstimator, ...] = get_args(AdvantageEstimator)

_WHITEN_EPS = 1e-8


def _as_float(tensor: Tensor) -> Tensor:
    return tensor if tensor.is_floating_point() else tensor.to(torch.float32)


def _check_token_tensor(name: str, tensor: Tensor, response_mask: Tensor) -> None:
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask: expected [batch, seq_len], got shape {tuple(response_mask.shape)}")
    if tensor.shape != response_mask.shape:
        raise ValueError(
            f"{name}: shape {tuple(tensor.shape)} does not match response_mask {tuple(response_mask.shape)}; "
            "pass token-level tensors as [batch, seq_len]"
        )


def _check_scores(scores: Tensor, group_ids: Tensor | None, response_mask: Tensor) -> None:
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask: expected [batch, seq_len], got shape {tuple(response_mask.shape)}")
    batch = response_mask.shape[0]
    if scores.shape != (batch,):
        raise ValueError(
            f"scores: expected one score per response, shape ({batch},), got {tuple(scores.shape)}; "
            "sum token-level rewards over the sequence first"
        )
    if group_ids is not None and group_ids.shape != (batch,):
        raise ValueError(
            f"group_ids: expected shape ({batch},), one group index per response, got {tuple(group_ids.shape)}"
        )


@dataclass(frozen=True, slots=True)
class _GroupStats:
    """Per-response view of its group's statistics (each tensor is [batch])."""

    size: Tensor
    total: Tensor
    mean: Tensor
    std: Tensor
    """Unbiased (n - 1) standard deviation; 0 for groups of one."""


def _group_stats(scores: Tensor, group_ids: Tensor) -> _GroupStats:
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    sizes = counts.to(scores.dtype)
    totals = torch.zeros_like(sizes).index_add_(0, inverse, scores)
    means = totals / sizes
    sq_dev = torch.zeros_like(sizes).index_add_(0, inverse, (scores - means[inverse]) ** 2)
    stds = torch.sqrt(sq_dev / (sizes - 1.0).clamp(min=1.0))
    return _GroupStats(size=sizes[inverse], total=totals[inverse], mean=means[inverse], std=stds[inverse])


def _broadcast(per_response: Tensor, response_mask: Tensor) -> Tensor:
    return per_response.unsqueeze(-1) * response_mask.to(per_response.dtype)


def masked_whiten(values: Tensor, mask: Tensor, *, eps: float = _WHITEN_EPS) -> Tensor:
    """``(x - mean) / sqrt(var + eps)`` over the valid tokens of the whole batch; 0 on padding.

    The variance is unbiased (n - 1); with fewer than two valid tokens it is taken as 0.
    """
    _check_token_tensor("values", values, mask)
    weights = mask.to(values.dtype)
    count = weights.sum()
    mean = (values * weights).sum() / count.clamp(min=1.0)
    centered = (values - mean) * weights
    var = (centered**2).sum() / (count - 1.0).clamp(min=1.0)
    return centered * torch.rsqrt(var + eps)


def outcome_token_rewards(scores: Tensor, response_mask: Tensor) -> Tensor:
    """Each response's score on its last valid token, zero elsewhere: ``[batch] -> [batch, seq_len]``."""
    _check_scores(scores, None, response_mask)
    scores = _as_float(scores)
    valid = response_mask > 0
    positions = torch.arange(response_mask.shape[1], device=response_mask.device)
    last = torch.where(valid, positions, -1).amax(dim=-1, keepdim=True)
    at_last = (positions == last) & valid
    return scores.unsqueeze(-1) * at_last.to(scores.dtype)


def grpo_advantages(
    scores: Tensor,
    group_ids: Tensor,
    response_mask: Tensor,
    *,
    normalize_by_std: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """GRPO: score minus its group's mean, over the group's unbiased std (+ ``eps``) when normalising."""
    _check_scores(scores, group_ids, response_mask)
    scores = _as_float(scores)
    stats = _group_stats(scores, group_ids)
    adv = scores - stats.mean  # a group of one centres to 0 (and its std is 0, so it stays 0)
    if normalize_by_std:
        adv = adv / (stats.std + eps)
    return _broadcast(adv, response_mask)


def rloo_advantages(scores: Tensor, group_ids: Tensor, response_mask: Tensor) -> Tensor:
    """RLOO: score minus the mean of the *other* responses of its group (leave-one-out)."""
    _check_scores(scores, group_ids, response_mask)
    scores = _as_float(scores)
    stats = _group_stats(scores, group_ids)
    others_mean = (stats.total - scores) / (stats.size - 1.0).clamp(min=1.0)
    return _broadcast(torch.where(stats.size > 1, scores - others_mean, 0.0), response_mask)


def reinforce_plus_plus_advantages(token_rewards: Tensor, response_mask: Tensor, *, gamma: float = 1.0) -> Tensor:
    """REINFORCE++: per-token discounted returns, whitened across the batch's valid tokens.

    ``token_rewards`` usually holds the outcome score on the last valid token
    (:func:`outcome_token_rewards`) minus a per-token KL penalty. Masked tokens are skipped: they add
    no reward and take no discount step.
    """
    _check_token_tensor("token_rewards", token_rewards, response_mask)
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma: must be in [0, 1], got {gamma}; 1.0 is usual for outcome rewards")
    token_rewards = _as_float(token_rewards)
    weights = response_mask.to(token_rewards.dtype)
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros_like(token_rewards[:, 0])
    for t in reversed(range(token_rewards.shape[1])):
        m = weights[:, t]
        running = m * (token_rewards[:, t] + gamma * running) + (1.0 - m) * running
        returns[:, t] = running * m
    return masked_whiten(returns, response_mask)


def reinforce_plus_plus_baseline_advantages(scores: Tensor, group_ids: Tensor, response_mask: Tensor) -> Tensor:
    """REINFORCE++ with a group baseline: score minus its group's mean, whitened across the batch's valid tokens."""
    _check_scores(scores, group_ids, response_mask)
    scores = _as_float(scores)
    centered = scores - _group_stats(scores, group_ids).mean  # a group of one centres to 0
    return masked_whiten(_broadcast(centered, response_mask), response_mask)


def gae_advantages(
    token_rewards: Tensor, values: Tensor, response_mask: Tensor, *, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation for PPO with a critic: ``(advantages, returns)``.

    Computed backwards over valid tokens only (a masked token passes the next value and the running
    advantage through unchanged). Returns are the raw advantages plus values; the advantages are then
    whitened over the valid tokens. Both are zero on padding.
    """
    _check_token_tensor("token_rewards", token_rewards, response_mask)
    _check_token_tensor("values", values, response_mask)
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma: must be in [0, 1], got {gamma}; 1.0 is usual for LLM post-training")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam: must be in [0, 1], got {lam}; 0.95 or 1.0 is usual")
    token_rewards = _as_float(token_rewards)
    values = values.to(token_rewards.dtype)
    weights = response_mask.to(token_rewards.dtype)
    raw = torch.zeros_like(token_rewards)
    next_value = torch.zeros_like(token_rewards[:, 0])
    running = torch.zeros_like(token_rewards[:, 0])
    for t in reversed(range(token_rewards.shape[1])):
        m = weights[:, t]
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        running = m * (delta + gamma * lam * running) + (1.0 - m) * running
        next_value = m * values[:, t] + (1.0 - m) * next_value
        raw[:, t] = running * m
    returns = (raw + values) * weights
    return masked_whiten(raw, response_mask), returns


def compute_advantages(
    estimator: AdvantageEstimator,
    *,
    scores: Tensor,
    response_mask: Tensor,
    group_ids: Tensor | None = None,
    kl_penalty: Tensor | None = None,
    gamma: float = 1.0,
    normalize_by_std: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """Token-level advantages from per-response ``scores`` with one of the outcome estimators.

    ``kl_penalty`` (``[batch, seq_len]``, already scaled by the KL coefficient) is subtracted from
    the token rewards; only ``reinforce_plus_plus`` takes KL in the reward this way. ``gae`` needs a
    critic: call :func:`gae_advantages`.
    """
    if estimator not in ADVANTAGE_ESTIMATORS:
        raise ValueError(
            f"estimator: unknown advantage estimator {estimator!r}; use one of {', '.join(ADVANTAGE_ESTIMATORS)}"
        )
    if estimator == "gae":
        raise ValueError("estimator: 'gae' needs per-token values from a critic; call gae_advantages instead")
    if kl_penalty is not None and estimator != "reinforce_plus_plus":
        raise ValueError(
            f"kl_penalty: {estimator!r} does not take KL in the reward; add kl_loss to the actor loss instead"
        )
    if estimator == "reinforce_plus_plus":
        token_rewards = outcome_token_rewards(scores, response_mask)
        if kl_penalty is not None:
            _check_token_tensor("kl_penalty", kl_penalty, response_mask)
            token_rewards = token_rewards - kl_penalty * response_mask.to(token_rewards.dtype)
        return reinforce_plus_plus_advantages(token_rewards, response_mask, gamma=gamma)
    if group_ids is None:
        raise ValueError(
            f"group_ids: {estimator!r} compares responses to the same prompt; pass one group index per response"
        )
    if estimator == "grpo":
        return grpo_advantages(scores, group_ids, response_mask, normalize_by_std=normalize_by_std, eps=eps)
    if estimator == "rloo":
        return rloo_advantages(scores, group_ids, response_mask)
    return reinforce_plus_plus_baseline_advantages(scores, group_ids, response_mask)
