"""Per-token KL estimators between the policy and the frozen reference, and the two ways to use them.

We only hold the log-probs of the sampled tokens, not whole distributions, so KL(policy || ref) is
estimated from the log-ratio of one sample per token: ``k1`` is unbiased but noisy and can go
negative, ``k2`` and ``k3`` are never negative, and ``k3`` is unbiased with low variance. KL either
enters the reward (PPO, REINFORCE++: :func:`apply_kl_penalty`) or is added to the actor loss
(GRPO: :func:`kl_loss`), aggregated like the policy loss.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor

from jigsaw_engine.rl.policy_loss import LossAggMode, aggregate_loss

KLEstimator = Literal["k1", "k2", "k3", "abs"]
KL_ESTIMATORS: tuple[KLEstimator, ...] = get_args(KLEstimator)

_LOG_RATIO_BOUND = 20.0  # keeps exp() finite in k3
_K3_BOUND = 10.0  # caps k3 so one runaway token cannot dominate the batch


def _check_same_shape(name: str, tensor: Tensor, ref_name: str, ref: Tensor) -> None:
    if tensor.shape != ref.shape:
        raise ValueError(
            f"{name}: shape {tuple(tensor.shape)} does not match {ref_name} {tuple(ref.shape)}; "
            "pass every token-level tensor as [batch, seq_len]"
        )


def estimate_kl(logp: Tensor, ref_logp: Tensor, *, estimator: KLEstimator) -> Tensor:
    """Per-token estimate of KL(policy || ref) from the sampled tokens' log-probs.

    - ``k1``: ``logp - ref_logp``
    - ``abs``: ``|logp - ref_logp|``
    - ``k2``: ``0.5 * (logp - ref_logp)^2``
    - ``k3``: ``exp(ref_logp - logp) - (ref_logp - logp) - 1``, clamped to ``[-10, 10]``
    """
    _check_same_shape("ref_logp", ref_logp, "logp", logp)
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator: unknown KL estimator {estimator!r}; use one of {', '.join(KL_ESTIMATORS)}")
    log_ratio = logp - ref_logp
    if estimator == "k1":
        return log_ratio
    if estimator == "abs":
        return log_ratio.abs()
    if estimator == "k2":
        return 0.5 * log_ratio**2
    ref_over_policy = torch.clamp(-log_ratio, -_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)
    k3 = torch.exp(ref_over_policy) - ref_over_policy - 1.0
    return torch.clamp(k3, -_K3_BOUND, _K3_BOUND)


def apply_kl_penalty(
    token_rewards: Tensor,
    logp: Tensor,
    ref_logp: Tensor,
    response_mask: Tensor,
    *,
    beta: float,
    estimator: KLEstimator = "k1",
) -> Tensor:
    """KL in the reward: ``token_rewards - beta * kl`` on valid tokens, zero on padding.

    ``logp`` is usually the rollout (old) policy's log-probs; the result is a reward, not a loss,
    so nothing here needs gradients.
    """
    _check_same_shape("logp", logp, "token_rewards", token_rewards)
    _check_same_shape("response_mask", response_mask, "token_rewards", token_rewards)
    if beta < 0.0:
        raise ValueError(f"beta: must be >= 0, got {beta}; use 0 to switch the KL penalty off")
    kl = estimate_kl(logp, ref_logp, estimator=estimator)
    return (token_rewards - beta * kl) * response_mask.to(token_rewards.dtype)


def kl_loss(
    logp: Tensor,
    ref_logp: Tensor,
    response_mask: Tensor,
    *,
    estimator: KLEstimator = "k3",
    agg_mode: LossAggMode = "token-mean",
) -> Tensor:
    """KL as a loss term: the per-token estimate aggregated like the policy loss (scale it by its coefficient)."""
    _check_same_shape("response_mask", response_mask, "logp", logp)
    return aggregate_loss(estimate_kl(logp, ref_logp, estimator=estimator), response_mask, agg_mode)
