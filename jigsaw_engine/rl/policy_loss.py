"""The actor's and the critic's losses, and how token losses become one number.

Recipes differ less in the per-token loss than in how it is averaged: over all tokens, per
sequence, or over a fixed length (Dr. GRPO), which changes how much long responses weigh. So the
aggregation is one function, :func:`aggregate_loss`, shared by the policy, entropy, KL and value
terms. The clipped policy loss carries DAPO's asymmetric clip ("clip-higher") and the dual clip
that bounds the loss of negative-advantage tokens whose ratio has run away; its decoupled form
(:func:`decoupled_ppo_policy_loss`) trains on rollouts an older policy generated (asynchronous
RL, as AReaL does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

import torch
from torch import Tensor

LossAggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
LOSS_AGG_MODES: tuple[LossAggMode, ...] = get_args(LossAggMode)

_LOG_RATIO_BOUND = 20.0  # exp(20) ~ 5e8: far past any clip, still finite in float32


def _check_same_shape(name: str, tensor: Tensor, ref_name: str, ref: Tensor) -> None:
    if tensor.shape != ref.shape:
        raise ValueError(
            f"{name}: shape {tuple(tensor.shape)} does not match {ref_name} {tuple(ref.shape)}; "
            "pass every token-level tensor as [batch, seq_len]"
        )


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` over the positions where ``mask`` is set; 0 when none is."""
    _check_same_shape("mask", mask, "values", values)
    weights = mask.to(values.dtype)
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def aggregate_loss(loss_mat: Tensor, mask: Tensor, mode: LossAggMode, *, norm_length: int | None = None) -> Tensor:
    """Reduce a ``[batch, seq_len]`` token loss to a scalar over the valid tokens of ``mask``.

    - ``token-mean``: every valid token weighs the same.
    - ``seq-mean-token-mean``: each sequence's token mean, then the mean over sequences.
    - ``seq-mean-token-sum``: each sequence's token sum, then the mean over sequences.
    - ``seq-mean-token-sum-norm``: the sum of all valid token losses over ``batch * norm_length``
      (Dr. GRPO); ``norm_length`` defaults to the padded ``seq_len``.

    The two ``seq-mean`` modes average over the sequences with at least one valid token.
    """
    if loss_mat.dim() != 2:
        raise ValueError(f"loss_mat: expected [batch, seq_len], got shape {tuple(loss_mat.shape)}")
    _check_same_shape("mask", mask, "loss_mat", loss_mat)
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"mode: unknown loss aggregation {mode!r}; use one of {', '.join(LOSS_AGG_MODES)}")
    if norm_length is not None and mode != "seq-mean-token-sum-norm":
        raise ValueError(f"norm_length: only used by 'seq-mean-token-sum-norm', not {mode!r}; leave it None")
    weights = mask.to(loss_mat.dtype)
    masked = loss_mat * weights
    if mode == "token-mean":
        return masked.sum() / weights.sum().clamp(min=1.0)
    if mode == "seq-mean-token-sum-norm":
        length = loss_mat.shape[-1] if norm_length is None else norm_length
        if length <= 0:
            raise ValueError(f"norm_length: must be positive, got {length}; pass the maximum response length")
        return masked.sum() / (loss_mat.shape[0] * length)
    tokens_per_seq = weights.sum(dim=-1)
    seq_losses = masked.sum(dim=-1)
    if mode == "seq-mean-token-mean":
        seq_losses = seq_losses / tokens_per_seq.clamp(min=1.0)
    has_tokens = (tokens_per_seq > 0).to(loss_mat.dtype)
    return (seq_losses * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)


@dataclass(frozen=True, slots=True)
class PolicyLossOutput:
    pg_loss: Tensor
    """The aggregated clipped surrogate loss (scalar, differentiable w.r.t. ``logp``)."""
    pg_clipfrac: Tensor
    """Fraction of valid tokens where the ratio clip raised the loss (detached)."""
    pg_clipfrac_lower: Tensor
    """Fraction of valid tokens where the dual clip capped a negative-advantage loss (detached)."""
    ppo_kl: Tensor
    """Masked mean of ``old_logp - logp``: how far the update has moved the policy (detached)."""
    behav_imp_weight: Tensor | None = None
    """Decoupled loss only: mean of ``pi_prox / pi_behav`` over the valid tokens the cap kept (detached)."""
    behav_capped_frac: Tensor | None = None
    """Decoupled loss only: fraction of valid tokens whose weight passed the cap and were left out (detached)."""


def ppo_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
    agg_mode: LossAggMode = "token-mean",
) -> PolicyLossOutput:
    """PPO's clipped surrogate with an asymmetric clip range and a dual clip.

    ``ratio = exp(logp - old_logp)`` is clipped to ``[1 - clip_ratio_low, 1 + clip_ratio_high]``;
    for negative advantages the loss is further capped at ``-advantage * clip_ratio_c``.
    """
    _check_same_shape("old_logp", old_logp, "logp", logp)
    clip = (clip_ratio_low, clip_ratio_high, clip_ratio_c)
    return _clipped_loss(logp, old_logp, advantages, response_mask, clip, agg_mode)


BEHAV_IMP_WEIGHT_CAP = 5.0
"""The decoupled loss leaves out tokens whose ``pi_prox / pi_behav`` exceeds this: AReaL's
``behav_imp_weight_cap``, 5 in its GRPO examples."""


def decoupled_ppo_policy_loss(
    logp: Tensor,
    prox_logp: Tensor,
    behav_logp: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
    behav_imp_weight_cap: float | None = BEHAV_IMP_WEIGHT_CAP,
    agg_mode: LossAggMode = "token-mean",
) -> PolicyLossOutput:
    """Decoupled PPO (AReaL, "asynchronous RL" for LLM reasoning): the clipped surrogate for
    tokens sampled by an older *behaviour* policy than the one being trained.

    Three policies meet in it. ``behav_logp``: the log-probs the rollout engine sampled each
    token with, recorded at generation (``pi_behav``, possibly several updates old).
    ``prox_logp``: the *proximal* policy, the current weights before this update (the
    ``old_logprob`` forward), which the clip keeps the update close to. ``logp``: the policy
    being trained. Per token::

        w     = pi_prox / pi_behav = exp(prox_logp - behav_logp)        (a constant: no gradient)
        r     = pi / pi_prox       = exp(logp - prox_logp)
        term  = max(-A * r, -A * clip(r, 1 - low, 1 + high))             (PPO's clipped term)
        term  = min(term, -A * c)   where A < 0                          (the dual clip)
        loss  = w * term            where w <= cap, else 0

    and ``loss`` is aggregated over ``response_mask`` as :func:`ppo_policy_loss` does. The
    weight is the importance-sampling correction from the behaviour policy to the proximal
    one; clipping around the proximal policy instead of the behaviour one bounds the update
    by what the current weights do, however stale the data. The cap is AReaL's rule: a token
    whose weight exceeds ``behav_imp_weight_cap`` (its behaviour policy gave it far less
    probability than the current one does) is left out of the loss, its term set to 0, while
    still counting in the aggregation's denominator; None keeps every token at its full weight.

    Where ``behav_logp == prox_logp`` (a synchronous step: the policy that generated the
    rollout is the one about to train) every weight is exactly 1 and this is
    :func:`ppo_policy_loss`, bit for bit.
    """
    _check_same_shape("prox_logp", prox_logp, "logp", logp)
    _check_same_shape("behav_logp", behav_logp, "logp", logp)
    if behav_imp_weight_cap is not None and not behav_imp_weight_cap > 1.0:
        raise ValueError(f"behav_imp_weight_cap: must be > 1 or None, got {behav_imp_weight_cap}; AReaL uses 5")
    _check_same_shape("advantages", advantages, "logp", logp)
    _check_same_shape("response_mask", response_mask, "logp", logp)
    weight = torch.exp(torch.clamp(prox_logp - behav_logp, -_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)).detach()
    valid = response_mask.bool()
    kept = valid if behav_imp_weight_cap is None else valid & (weight <= behav_imp_weight_cap)
    weight = torch.where(kept, weight, torch.zeros_like(weight))
    clip = (clip_ratio_low, clip_ratio_high, clip_ratio_c)
    out = _clipped_loss(logp, prox_logp, advantages, response_mask, clip, agg_mode, weight=weight)
    return replace(
        out,
        behav_imp_weight=masked_mean(weight, kept.to(weight.dtype)).detach(),
        behav_capped_frac=masked_mean((valid & ~kept).to(weight.dtype), response_mask).detach(),
    )


def _clipped_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    clip: tuple[float, float, float],
    agg_mode: LossAggMode,
    *,
    weight: Tensor | None = None,
) -> PolicyLossOutput:
    """PPO's clipped term per token against ``old_logp`` (``clip``: low, high, dual), times
    ``weight`` where given, aggregated; and its detached statistics."""
    low, high, c = clip
    _check_same_shape("advantages", advantages, "logp", logp)
    _check_same_shape("response_mask", response_mask, "logp", logp)
    if not 0.0 <= low < 1.0:
        raise ValueError(f"clip_ratio_low: must be in [0, 1), got {low}; 0.2 is usual")
    if high < 0.0:
        raise ValueError(f"clip_ratio_high: must be >= 0, got {high}; 0.2 (0.28 for DAPO) is usual")
    if c <= 1.0:
        raise ValueError(f"clip_ratio_c: must be > 1, got {c}; the dual clip's usual value is 3.0")

    log_ratio = torch.clamp(logp - old_logp, -_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)
    ratio = torch.exp(log_ratio)
    ppo_kl = masked_mean(-log_ratio, response_mask)

    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - low, 1.0 + high)
    clip_loss = torch.maximum(unclipped, clipped)
    pg_clipfrac = masked_mean((clipped > unclipped).to(logp.dtype), response_mask)

    dual_cap = -advantages * c
    negative = advantages < 0
    pg_clipfrac_lower = masked_mean(((clip_loss > dual_cap) & negative).to(logp.dtype), response_mask)
    pg_losses = torch.where(negative, torch.minimum(clip_loss, dual_cap), clip_loss)
    return PolicyLossOutput(
        pg_loss=aggregate_loss(pg_losses if weight is None else pg_losses * weight, response_mask, agg_mode),
        pg_clipfrac=pg_clipfrac.detach(),
        pg_clipfrac_lower=pg_clipfrac_lower.detach(),
        ppo_kl=ppo_kl.detach(),
    )


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the softmax over the last dimension: ``[batch, seq, vocab] -> [batch, seq]``.

    ``H = logsumexp(z) - sum(softmax(z) * z)``, which never takes the log of a tiny probability.
    """
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits: expected [..., vocab] with vocab > 0, got shape {tuple(logits.shape)}")
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def entropy_bonus(
    entropy: Tensor, response_mask: Tensor, *, coeff: float, agg_mode: LossAggMode = "token-mean"
) -> Tensor:
    """The term to add to the actor loss: ``-coeff * aggregated entropy`` (minimising it raises entropy)."""
    if coeff < 0.0:
        raise ValueError(f"coeff: must be >= 0, got {coeff}; use 0 to switch the entropy bonus off")
    return -coeff * aggregate_loss(entropy, response_mask, agg_mode)


@dataclass(frozen=True, slots=True)
class ValueLossOutput:
    vf_loss: Tensor
    """``0.5 * max((v - R)^2, (clip(v) - R)^2)``, aggregated (scalar, differentiable w.r.t. ``values``)."""
    vf_clipfrac: Tensor
    """Fraction of valid tokens where the clipped error was the larger one (detached)."""


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    response_mask: Tensor,
    *,
    clip_range: float,
    agg_mode: LossAggMode = "token-mean",
) -> ValueLossOutput:
    """The critic's clipped regression loss: new values may move at most ``clip_range`` from the old."""
    _check_same_shape("old_values", old_values, "values", values)
    _check_same_shape("returns", returns, "values", values)
    _check_same_shape("response_mask", response_mask, "values", values)
    if clip_range <= 0.0:
        raise ValueError(f"clip_range: must be > 0, got {clip_range}; 0.5 is usual")
    clipped_values = torch.clamp(values, old_values - clip_range, old_values + clip_range)
    unclipped_err = (values - returns) ** 2
    clipped_err = (clipped_values - returns) ** 2
    loss_mat = 0.5 * torch.maximum(unclipped_err, clipped_err)
    vf_clipfrac = masked_mean((clipped_err > unclipped_err).to(values.dtype), response_mask)
    return ValueLossOutput(
        vf_loss=aggregate_loss(loss_mat, response_mask, agg_mode),
        vf_clipfrac=vf_clipfrac.detach(),
    )
