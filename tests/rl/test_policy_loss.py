"""Loss aggregation, the clipped policy loss, entropy and the value loss against hand-worked examples."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from jigsaw_engine.rl.policy_loss import (
    LOSS_AGG_MODES,
    aggregate_loss,
    decoupled_ppo_policy_loss,
    entropy_bonus,
    entropy_from_logits,
    ppo_policy_loss,
    value_loss,
)

from .tensors import F64, t

# --- aggregation ----------------------------------------------------------------------------

# Ragged: row 0 has 3 valid tokens [1, 2, 3], row 1 has 1 valid token [4]; padding holds 100s.
RAGGED_LOSS = [[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]]
RAGGED_MASK = [[1, 1, 1], [1, 0, 0]]


@pytest.mark.parametrize(
    ("mode", "norm_length", "expected"),
    [
        ("token-mean", None, 2.5),  # (1 + 2 + 3 + 4) / 4
        ("seq-mean-token-mean", None, 3.0),  # (6 / 3 + 4 / 1) / 2 = (2 + 4) / 2
        ("seq-mean-token-sum", None, 5.0),  # (6 + 4) / 2
        ("seq-mean-token-sum-norm", None, 10 / 6),  # 10 / (batch 2 * padded length 3)
        ("seq-mean-token-sum-norm", 5, 1.0),  # 10 / (2 * 5)
    ],
)
def test_aggregation_modes_differ_on_ragged_masks(mode: str, norm_length: int | None, expected: float) -> None:
    got = aggregate_loss(t(RAGGED_LOSS), t(RAGGED_MASK), mode, norm_length=norm_length)  # type: ignore[arg-type]
    assert_close(got, t(expected))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 1.5),  # (1 + 2) / 2
        ("seq-mean-token-mean", 1.5),  # the empty row does not count as a sequence
        ("seq-mean-token-sum", 3.0),
        ("seq-mean-token-sum-norm", 0.75),  # 3 / (2 * 2): the constant denominator keeps every row
    ],
)
def test_aggregation_with_an_empty_row(mode: str, expected: float) -> None:
    got = aggregate_loss(t([[1.0, 2.0], [9.0, 9.0]]), t([[1, 1], [0, 0]]), mode)  # type: ignore[arg-type]
    assert_close(got, t(expected))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "sum"}, "mode"),
        ({"mask": torch.ones(2, 2)}, "mask"),
        ({"norm_length": 4}, "norm_length"),
        ({"mode": "seq-mean-token-sum-norm", "norm_length": 0}, "norm_length"),
    ],
)
def test_aggregation_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"loss_mat": torch.ones(2, 3), "mask": torch.ones(2, 3), "mode": "token-mean"} | kwargs
    with pytest.raises(ValueError, match=match):
        aggregate_loss(**args)  # type: ignore[arg-type]


# --- clipped policy loss --------------------------------------------------------------------

# Six valid tokens and one padding token; old_logp = 0 so ratio = exp(logp).
ADVANTAGES = [1.0, 1.0, 2.0, -1.0, -1.0, -0.5, 100.0]
RATIOS = [1.1, 1.25, 1.5, 0.5, 4.0, 0.9, 50.0]
MASK = [1, 1, 1, 1, 1, 1, 0]


def policy_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    logp = torch.log(t([RATIOS])).requires_grad_(True)
    return logp, torch.zeros(1, len(RATIOS), dtype=F64), t([ADVANTAGES]), t([MASK])


@pytest.mark.parametrize(
    ("clip_ratio_high", "expected_loss", "expected_clipfrac"),
    [
        # clip-higher (low 0.2, high 0.28), c = 3:
        #   t0 A=+1 r=1.1:  -1.1                                    (inside the range)
        #   t1 A=+1 r=1.25: -1.25                                   (inside 1.28)
        #   t2 A=+2 r=1.5:  max(-3, -2 * 1.28 = -2.56) = -2.56      (clipped)
        #   t3 A=-1 r=0.5:  max(0.5, 1 * 0.8 = 0.8) = 0.8           (clipped)
        #   t4 A=-1 r=4.0:  max(4, 1.28) = 4 -> min(4, 1 * 3) = 3  (dual clip)
        #   t5 A=-.5 r=0.9: 0.45                                    (inside the range)
        # sum -0.66 / 6 = -0.11; clipped 2 of 6
        (0.28, -0.11, 2 / 6),
        # symmetric 0.2: t1 -> -1.2 (clipped), t2 -> -2.4
        # sum (-1.1 - 1.2 - 2.4 + 0.8 + 3 + 0.45) = -0.45 / 6 = -0.075; clipped 3 of 6
        (0.2, -0.075, 3 / 6),
    ],
)
def test_ppo_policy_loss_clip_higher_and_dual_clip(
    clip_ratio_high: float, expected_loss: float, expected_clipfrac: float
) -> None:
    logp, old_logp, adv, mask = policy_inputs()
    out = ppo_policy_loss(logp, old_logp, adv, mask, clip_ratio_low=0.2, clip_ratio_high=clip_ratio_high)
    assert_close(out.pg_loss, t(expected_loss))
    assert_close(out.pg_clipfrac, t(expected_clipfrac))
    assert_close(out.pg_clipfrac_lower, t(1 / 6))  # only t4
    # ppo_kl = mean(old - logp) = -ln(1.1 * 1.25 * 1.5 * 0.5 * 4 * 0.9) / 6 = -ln(3.7125) / 6 = -0.218618
    assert_close(out.ppo_kl, t(-math.log(3.7125) / 6))
    assert not out.pg_clipfrac.requires_grad


def test_pg_loss_gradient_is_zero_exactly_on_clipped_tokens() -> None:
    logp, old_logp, adv, mask = policy_inputs()
    out = ppo_policy_loss(logp, old_logp, adv, mask, clip_ratio_low=0.2, clip_ratio_high=0.28)
    (grad,) = torch.autograd.grad(out.pg_loss, logp)
    # d(-A * r)/d logp = -A * r, over 6 tokens; t2, t3 (ratio clip), t4 (dual clip) and the padding get 0.
    expected = t([[-1.1 / 6, -1.25 / 6, 0.0, 0.0, 0.0, 0.45 / 6, 0.0]])
    assert_close(grad, expected)
    assert (grad[0, [0, 1, 5]] != 0).all()


def test_dual_clip_only_caps_negative_advantages() -> None:
    # A=+1, r=4: clipped to 1.2 -> -1.2 (no dual clip on positive advantages).
    # A=-2, r=5: max(10, 2 * 1.2) = 10 -> min(10, 2 * 3) = 6.   token-mean: (-1.2 + 6) / 2 = 2.4
    logp = torch.log(t([[4.0, 5.0]]))
    out = ppo_policy_loss(logp, torch.zeros(1, 2, dtype=F64), t([[1.0, -2.0]]), torch.ones(1, 2, dtype=F64))
    assert_close(out.pg_loss, t(2.4))
    assert_close(out.pg_clipfrac_lower, t(0.5))


def test_log_ratio_is_clamped_before_exp() -> None:
    out = ppo_policy_loss(
        t([[0.0]]), t([[-1000.0]]), t([[-1.0]]), t([[1]]), clip_ratio_c=3.0
    )  # ratio would be exp(1000)
    assert_close(out.pg_loss, t(3.0))  # capped by the dual clip, finite
    assert_close(out.ppo_kl, t(-20.0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"clip_ratio_c": 1.0}, "clip_ratio_c"),
        ({"clip_ratio_low": 1.0}, "clip_ratio_low"),
        ({"clip_ratio_high": -0.1}, "clip_ratio_high"),
        ({"agg_mode": "mean"}, "mode"),
    ],
)
def test_ppo_policy_loss_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=match):
        ppo_policy_loss(x, x, x, torch.ones(2, 3), **kwargs)  # type: ignore[arg-type]


def test_ppo_policy_loss_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="advantages"):
        ppo_policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 2), torch.ones(2, 3))


# --- decoupled PPO (asynchronous rollouts) --------------------------------------------------

# Six valid tokens and a padding one. w = pi_prox / pi_behav (the importance weight from the
# policy that sampled the token to the proximal one), r = pi / pi_prox; cap 5, clip 0.2, c = 3.
WEIGHTS = [2.0, 0.5, 8.0, 1.0, 4.0, 0.5, 100.0]
DECOUPLED_RATIOS = [1.5, 0.5, 1.0, 1.1, 4.0, 0.9, 50.0]
DECOUPLED_ADVANTAGES = [1.0, -1.0, 1.0, 2.0, -1.0, -0.5, 100.0]


def decoupled_inputs() -> tuple[torch.Tensor, ...]:
    prox = t([[-1.0, -0.5, -2.0, -1.5, -3.0, -0.7, -1.0]])
    logp = (prox + torch.log(t([DECOUPLED_RATIOS]))).requires_grad_(True)
    behav = prox - torch.log(t([WEIGHTS]))
    return logp, prox, behav, t([DECOUPLED_ADVANTAGES]), t([MASK])


def test_decoupled_loss_weighs_the_clipped_term_by_prox_over_behav_and_drops_past_the_cap() -> None:
    #   PPO term (against the proximal policy)                  x w     = token loss
    #   t0 A=+1  r=1.5: max(-1.5, -1.2) = -1.2   (ratio clip)   x 2     = -2.4
    #   t1 A=-1  r=0.5: max(0.5, 0.8)   =  0.8   (ratio clip)   x 0.5   =  0.4
    #   t2 A=+1  r=1.0: -1                                      w 8 > 5 =  0 (left out)
    #   t3 A=+2  r=1.1: -2.2                                    x 1     = -2.2
    #   t4 A=-1  r=4.0: max(4, 1.2) = 4 -> min(4, 3) = 3 (dual) x 4     = 12
    #   t5 A=-.5 r=0.9: 0.45                                    x 0.5   =  0.225
    #   sum 8.025 over the 6 valid tokens (the left-out one still counts) = 1.3375
    logp, prox, behav, adv, mask = decoupled_inputs()
    out = decoupled_ppo_policy_loss(logp, prox, behav, adv, mask, behav_imp_weight_cap=5.0)
    assert_close(out.pg_loss, t(8.025 / 6))
    assert_close(out.pg_clipfrac, t(2 / 6))  # t0, t1
    assert_close(out.pg_clipfrac_lower, t(1 / 6))  # t4
    assert_close(out.behav_imp_weight, t((2 + 0.5 + 1 + 4 + 0.5) / 5))  # over the 5 kept tokens
    assert_close(out.behav_capped_frac, t(1 / 6))  # t2
    # d(-w A r)/d logp = -w A r on the unclipped, kept tokens (t3, t5), 0 elsewhere; / 6 tokens.
    (grad,) = torch.autograd.grad(out.pg_loss, logp)
    assert_close(grad, t([[0.0, 0.0, 0.0, -2.2 / 6, 0.0, 0.225 / 6, 0.0]]))
    # No cap: t2 comes back at w = 8: -1 x 8 = -8; sum 0.025 / 6.
    uncapped = decoupled_ppo_policy_loss(logp, prox, behav, adv, mask, behav_imp_weight_cap=None)
    assert_close(uncapped.pg_loss, t(0.025 / 6))
    # The same tokens without the correction are PPO's: -1.2 + 0.8 - 1 - 2.2 + 3 + 0.45 = -0.15.
    assert_close(ppo_policy_loss(logp, prox, adv, mask).pg_loss, t(-0.15 / 6))


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_decoupled_loss_is_ppo_bit_for_bit_when_behaviour_is_proximal(mode: str) -> None:
    """A synchronous step: the policy that sampled the rollout is the one about to train, every
    weight is exactly 1, and the loss, its gradient and its statistics are PPO's."""
    generator = torch.Generator().manual_seed(0)
    prox = -torch.rand(4, 9, generator=generator, dtype=torch.float32) * 3
    adv = torch.randn(4, 9, generator=generator)
    mask = (torch.rand(4, 9, generator=generator) > 0.2).float()
    logp = (prox + 0.3 * torch.randn(4, 9, generator=generator)).requires_grad_(True)
    ppo = ppo_policy_loss(logp, prox, adv, mask, clip_ratio_high=0.28, agg_mode=mode)  # type: ignore[arg-type]
    decoupled = decoupled_ppo_policy_loss(logp, prox, prox.clone(), adv, mask, clip_ratio_high=0.28, agg_mode=mode)  # type: ignore[arg-type]
    assert torch.equal(ppo.pg_loss, decoupled.pg_loss)
    assert torch.equal(*(torch.autograd.grad(out.pg_loss, logp)[0] for out in (ppo, decoupled)))
    for name in ("pg_clipfrac", "pg_clipfrac_lower", "ppo_kl"):
        assert torch.equal(getattr(ppo, name), getattr(decoupled, name)), name
    assert decoupled.behav_imp_weight == 1.0 and decoupled.behav_capped_frac == 0.0


def test_decoupled_loss_rejects_a_cap_at_or_below_one() -> None:
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="behav_imp_weight_cap: must be > 1"):
        decoupled_ppo_policy_loss(x, x, x, x, torch.ones(1, 2), behav_imp_weight_cap=1.0)


# --- entropy --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("logits", "expected"),
    [
        ([0.0, 0.0, 0.0, 0.0], math.log(4)),  # uniform over 4: ln 4 = 1.3863
        # p = [0.25, 0.75]: -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.3466 + 0.2158 = 0.5623
        ([0.0, math.log(3)], -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))),
        ([1000.0, 1000.0], math.log(2)),  # huge logits: no overflow
        ([1e4, 0.0], 0.0),  # one-hot in effect: no 0 * log 0 NaN
    ],
)
def test_entropy_from_logits(logits: list[float], expected: float) -> None:
    got = entropy_from_logits(t([[logits]]))
    assert got.shape == (1, 1)
    assert_close(got, t([[expected]]))


def test_entropy_bonus_is_minus_coeff_times_aggregated_entropy() -> None:
    # entropies [[ln 2, ln 4], [ln 2, pad]], token-mean (ln 2 + ln 4 + ln 2) / 3 = 4 ln 2 / 3 = 0.9242
    # bonus = -0.01 * 0.9242 = -0.009242
    entropy = t([[math.log(2), math.log(4)], [math.log(2), 50.0]])
    got = entropy_bonus(entropy, t([[1, 1], [1, 0]]), coeff=0.01)
    assert_close(got, t(-0.01 * 4 * math.log(2) / 3))


# --- value loss -----------------------------------------------------------------------------


def test_value_loss_clipping() -> None:
    # clip_range 0.2:
    #   t0 v=1.0 old=0.9 R=1.5: clip(v)=1.0; errors 0.25, 0.25 -> 0.5 * 0.25 = 0.125
    #   t1 v=1.5 old=1.0 R=2.0: clip(v)=1.2; errors 0.25, 0.64 -> 0.5 * 0.64 = 0.32  (clipped one larger)
    #   t2 v=1.5 old=1.0 R=1.0: clip(v)=1.2; errors 0.25, 0.04 -> 0.5 * 0.25 = 0.125
    #   t3 padding
    # token-mean (0.125 + 0.32 + 0.125) / 3 = 0.19; vf_clipfrac 1/3
    values = t([[1.0, 1.5, 1.5, 9.0]]).requires_grad_(True)
    out = value_loss(values, t([[0.9, 1.0, 1.0, 0.0]]), t([[1.5, 2.0, 1.0, 0.0]]), t([[1, 1, 1, 0]]), clip_range=0.2)
    assert_close(out.vf_loss, t(0.19))
    assert_close(out.vf_clipfrac, t(1 / 3))
    (grad,) = torch.autograd.grad(out.vf_loss, values)
    # d/dv 0.5 (v - R)^2 / 3 = (v - R) / 3 where the unclipped error wins; 0 where the clipped one does.
    assert_close(grad, t([[-0.5 / 3, 0.0, 0.5 / 3, 0.0]]))


def test_value_loss_rejects_bad_arguments() -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="clip_range"):
        value_loss(x, x, x, torch.ones(2, 3), clip_range=0.0)
    with pytest.raises(ValueError, match="returns"):
        value_loss(x, x, torch.zeros(2, 2), torch.ones(2, 3), clip_range=0.5)
