"""KL estimators and the two ways KL enters training, against hand-worked examples."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from jigsaw_engine.rl.kl import apply_kl_penalty, estimate_kl, kl_loss

from .tensors import t

# logp [-1, -2], ref [-1.5, -1]: log-ratio logp - ref = [0.5, -1]; ref - logp = [-0.5, 1]
LOGP = [-1.0, -2.0]
REF = [-1.5, -1.0]


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        ("k1", [0.5, -1.0]),
        ("abs", [0.5, 1.0]),
        ("k2", [0.125, 0.5]),  # 0.5 * 0.25, 0.5 * 1
        # exp(-0.5) + 0.5 - 1 = 0.6065 - 0.5 = 0.1065; exp(1) - 1 - 1 = 0.7183
        ("k3", [math.exp(-0.5) + 0.5 - 1.0, math.e - 2.0]),
    ],
)
def test_estimators(estimator: str, expected: list[float]) -> None:
    assert_close(estimate_kl(t(LOGP), t(REF), estimator=estimator), t(expected))  # type: ignore[arg-type]


def test_k3_is_clamped_and_finite_far_from_the_reference() -> None:
    # ref - logp = +30 -> exp overflows without the log-ratio clamp; -30 -> 30 - 1 = 29 > 10. Both cap at 10.
    got = estimate_kl(torch.tensor([-30.0, 0.0]), torch.tensor([0.0, -30.0]), estimator="k3")
    assert_close(got, torch.tensor([10.0, 10.0]))


def test_k3_gradient_vanishes_where_policy_equals_reference() -> None:
    # d/dlogp [exp(ref - logp) - (ref - logp) - 1] = 1 - exp(ref - logp) = 0 at logp = ref; at
    # logp - ref = 0.5 it is 1 - exp(-0.5) = 0.3935.
    logp = t([-1.0, -1.0]).requires_grad_(True)
    (grad,) = torch.autograd.grad(estimate_kl(logp, t([-1.0, -1.5]), estimator="k3").sum(), logp)
    assert_close(grad, t([0.0, 1.0 - math.exp(-0.5)]))


def test_apply_kl_penalty_in_the_reward() -> None:
    # k1 per token: logp - ref = [[0.5, -1, 0], [0.2, 0.4, pad]]; beta 0.1
    # rewards [[0, 0, 1], [0, 1, pad]] - 0.1 * kl = [[-0.05, 0.1, 1], [-0.02, 0.96, 0]]
    logp = t([[-1.0, -2.0, -1.0], [-0.3, -0.6, -5.0]])
    ref = t([[-1.5, -1.0, -1.0], [-0.5, -1.0, 0.0]])
    rewards = t([[0.0, 0.0, 1.0], [0.0, 1.0, 7.0]])
    got = apply_kl_penalty(rewards, logp, ref, t([[1, 1, 1], [1, 1, 0]]), beta=0.1)
    assert_close(got, t([[-0.05, 0.1, 1.0], [-0.02, 0.96, 0.0]]))


@pytest.mark.parametrize(
    ("agg_mode", "expected"),
    [
        ("token-mean", 0.8 / 3),  # k1 [[0.5, 0.1], [0.2, pad]]: (0.5 + 0.1 + 0.2) / 3
        ("seq-mean-token-mean", 0.25),  # (0.3 + 0.2) / 2
        ("seq-mean-token-sum", 0.4),  # (0.6 + 0.2) / 2
    ],
)
def test_kl_loss_aggregates_like_the_policy_loss(agg_mode: str, expected: float) -> None:
    logp = t([[-1.0, -1.0], [-1.0, 3.0]])
    ref = t([[-1.5, -1.1], [-1.2, 0.0]])
    got = kl_loss(logp, ref, t([[1, 1], [1, 0]]), estimator="k1", agg_mode=agg_mode)  # type: ignore[arg-type]
    assert_close(got, t(expected))


def test_kl_rejects_bad_arguments() -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="estimator"):
        estimate_kl(x, x, estimator="k4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ref_logp"):
        estimate_kl(x, torch.zeros(2, 2), estimator="k1")
    with pytest.raises(ValueError, match="beta"):
        apply_kl_penalty(x, x, x, torch.ones(2, 3), beta=-1.0)
