"""Advantage estimators against hand-worked examples."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from jigsaw_engine.rl.advantages import (
    compute_advantages,
    gae_advantages,
    grpo_advantages,
    masked_whiten,
    outcome_token_rewards,
    reinforce_plus_plus_advantages,
    reinforce_plus_plus_baseline_advantages,
    rloo_advantages,
)

from .tensors import F64, t


def ones(batch: int, seq: int = 2) -> torch.Tensor:
    return torch.ones(batch, seq, dtype=F64)


def per_response(column: list[float], seq: int = 2) -> torch.Tensor:
    return t(column).unsqueeze(-1).expand(-1, seq)


# --- GRPO -----------------------------------------------------------------------------------


def test_grpo_one_group() -> None:
    # [1, 0, 0, 1]: mean 0.5, deviations +-0.5, unbiased var (4 * 0.25) / 3 = 1/3,
    # std sqrt(1/3) = 0.5774 -> advantages +-0.5 / 0.5774 = +-0.866.
    adv = grpo_advantages(t([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 0, 0]), ones(4))
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    assert_close(adv, per_response([a, -a, -a, a]))
    assert abs(adv[0, 0].item() - 0.8660) < 1e-4


@pytest.mark.parametrize(
    ("normalize_by_std", "expected"),
    [
        # group 7 = [1, 0]: mean 0.5, std sqrt(0.5) = 0.7071 -> +-0.5 / 0.7071 = +-0.7071
        # group 3 = [2, 4]: mean 3,   std sqrt(2)   = 1.4142 -> -+1 / 1.4142  = -+0.7071
        (
            True,
            [
                0.5 / (math.sqrt(0.5) + 1e-6),
                -1 / (math.sqrt(2) + 1e-6),
                -0.5 / (math.sqrt(0.5) + 1e-6),
                1 / (math.sqrt(2) + 1e-6),
            ],
        ),
        # Dr. GRPO: only centred -> [1 - 0.5, 2 - 3, 0 - 0.5, 4 - 3]
        (False, [0.5, -1.0, -0.5, 1.0]),
    ],
)
def test_grpo_interleaved_groups(normalize_by_std: bool, expected: list[float]) -> None:
    adv = grpo_advantages(
        t([1.0, 2.0, 0.0, 4.0]), torch.tensor([7, 3, 7, 3]), ones(4), normalize_by_std=normalize_by_std
    )
    assert_close(adv, per_response(expected))


def test_grpo_size_one_and_all_equal_groups_get_zero() -> None:
    # group 0 = [5] (alone) -> 0; group 1 = [1, 3] -> -+1 / sqrt(2); group 2 = [2, 2, 2] -> std 0 -> 0, no NaN
    adv = grpo_advantages(t([5.0, 1.0, 3.0, 2.0, 2.0, 2.0]), torch.tensor([0, 1, 1, 2, 2, 2]), ones(6))
    a = 1 / (math.sqrt(2) + 1e-6)
    assert_close(adv, per_response([0.0, -a, a, 0.0, 0.0, 0.0]))


def test_grpo_masks_padding() -> None:
    # [1, 0]: mean 0.5, std sqrt(0.5) -> +-0.7071 on valid tokens, 0 on padding.
    mask = t([[1, 1, 0], [1, 0, 0]])
    adv = grpo_advantages(t([1.0, 0.0]), torch.tensor([0, 0]), mask)
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert_close(adv, t([[a, a, 0.0], [-a, 0.0, 0.0]]))


def test_grpo_accepts_integer_scores_and_bool_mask() -> None:
    adv = grpo_advantages(torch.tensor([1, 0]), torch.tensor([0, 0]), torch.tensor([[True, False], [True, True]]))
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert_close(adv, torch.tensor([[a, 0.0], [-a, -a]], dtype=torch.float32))


# --- RLOO -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scores", "group_ids", "expected"),
    [
        # 1 vs others [0, 0, 1] (mean 1/3) -> 2/3; 0 vs others [0, 1, 1] (mean 2/3) -> -2/3
        ([1.0, 0.0, 0.0, 1.0], [0, 0, 0, 0], [2 / 3, -2 / 3, -2 / 3, 2 / 3]),
        # pair [3, 5] -> [3 - 5, 5 - 3]; [7] alone -> 0
        ([3.0, 7.0, 5.0], [1, 2, 1], [-2.0, 0.0, 2.0]),
        # all equal [4, 4, 4] -> 0
        ([4.0, 4.0, 4.0], [0, 0, 0], [0.0, 0.0, 0.0]),
    ],
)
def test_rloo(scores: list[float], group_ids: list[int], expected: list[float]) -> None:
    adv = rloo_advantages(t(scores), torch.tensor(group_ids), ones(len(scores)))
    assert_close(adv, per_response(expected))


# --- REINFORCE++ ----------------------------------------------------------------------------


def test_outcome_token_rewards_puts_the_score_on_the_last_valid_token() -> None:
    mask = t([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]])
    rewards = outcome_token_rewards(t([1.0, 2.0, 3.0, 4.0]), mask)
    assert_close(rewards, t([[0, 0, 1], [0, 2, 0], [3, 0, 0], [0, 0, 0]]))


def test_reinforce_plus_plus_discounted_and_whitened() -> None:
    # rewards [[0, 0, 1], [0, 2, pad]], gamma 0.5 -> returns [[0.25, 0.5, 1], [1, 2]]
    # valid returns mean 4.75 / 5 = 0.95; centred [-0.7, -0.45, 0.05, 0.05, 1.05];
    # squares sum 1.8 -> unbiased var 1.8 / 4 = 0.45, std 0.6708
    # -> [-1.0435, -0.6708, 0.0745, 0.0745, 1.5652]
    mask = t([[1, 1, 1], [1, 1, 0]])
    rewards = outcome_token_rewards(t([1.0, 2.0]), mask)
    adv = reinforce_plus_plus_advantages(rewards, mask, gamma=0.5)
    s = math.sqrt(0.45 + 1e-8)
    assert_close(adv, t([[-0.7 / s, -0.45 / s, 0.05 / s], [0.05 / s, 1.05 / s, 0.0]]))
    assert_close(adv[0, 0], t(-1.0435), atol=1e-4, rtol=0)


def test_reinforce_plus_plus_skips_masked_tokens() -> None:
    # Row 0 has a masked tool-output token in the middle: its reward 5 is ignored and it takes no
    # discount step: returns [0 + 0.5 * 1, -, 1] = [0.5, -, 1]. Row 1 returns [0, 0, 0].
    # Valid [0.5, 1, 0, 0, 0]: mean 0.3, centred [0.2, 0.7, -0.3 x3], squares sum 0.8,
    # var 0.8 / 4 = 0.2, std 0.4472 -> [0.4472, 1.5652, -0.6708 x3]
    mask = t([[1, 0, 1], [1, 1, 1]])
    rewards = t([[0.0, 5.0, 1.0], [0.0, 0.0, 0.0]])
    adv = reinforce_plus_plus_advantages(rewards, mask, gamma=0.5)
    s = math.sqrt(0.2 + 1e-8)
    assert_close(adv, t([[0.2 / s, 0.0, 0.7 / s], [-0.3 / s, -0.3 / s, -0.3 / s]]))


def test_reinforce_plus_plus_with_kl_penalty_through_the_dispatcher() -> None:
    # scores [1, 0] on the last token, minus kl_penalty [[0.1, 0.2], [0.0, 0.3]]
    # -> rewards [[-0.1, 0.8], [0.0, -0.3]], gamma 1 -> returns [[0.7, 0.8], [-0.3, -0.3]]
    # mean 0.225, unbiased std 0.6076 -> [0.7818, 0.9464, -0.8641, -0.8641]
    adv = compute_advantages(
        "reinforce_plus_plus",
        scores=t([1.0, 0.0]),
        response_mask=ones(2),
        kl_penalty=t([[0.1, 0.2], [0.0, 0.3]]),
    )
    assert_close(adv, t([[0.78177606, 0.9463605], [-0.86406828, -0.86406828]]), atol=1e-6, rtol=0)


def test_reinforce_plus_plus_baseline() -> None:
    # scores [1, 0 | 3, 3 | 2], groups [0, 0, 1, 1, 2] -> centred [0.5, -0.5, 0, 0, 0] (group 2 is alone)
    # tokens (lengths 2, 1, 1, 2, 1): [0.5, 0.5 | -0.5 | 0 | 0, 0 | 0], 7 valid
    # mean 0.5 / 7 = 1/14; centred 3/7 (x2), -4/7, -1/14 (x4); squares sum 5/7 -> var 5/42
    mask = t([[1, 1], [1, 0], [1, 0], [1, 1], [1, 0]])
    adv = reinforce_plus_plus_baseline_advantages(t([1.0, 0.0, 3.0, 3.0, 2.0]), torch.tensor([0, 0, 1, 1, 2]), mask)
    s = math.sqrt(5 / 42 + 1e-8)
    hi, lo, mid = 3 / 7 / s, -4 / 7 / s, -1 / 14 / s
    assert_close(adv, t([[hi, hi], [lo, 0.0], [mid, 0.0], [mid, mid], [mid, 0.0]]))


def test_masked_whiten_degenerate_cases() -> None:
    assert_close(masked_whiten(t([[3.0, 9.0]]), t([[1, 0]])), t([[0.0, 0.0]]))  # one valid token
    assert_close(masked_whiten(t([[3.0, 9.0]]), t([[0, 0]])), t([[0.0, 0.0]]))  # none
    assert_close(masked_whiten(t([[2.0, 2.0]]), t([[1, 1]])), t([[0.0, 0.0]]))  # all equal


# --- GAE ------------------------------------------------------------------------------------


def test_gae_gamma_one_lambda_one() -> None:
    # rewards [0, 0, 1], values [0.5, 0.6, 0.7]
    # deltas: t2 = 1 - 0.7 = 0.3; t1 = 0.7 - 0.6 = 0.1; t0 = 0.6 - 0.5 = 0.1
    # advantages (sums from the end): [0.5, 0.4, 0.3]; returns = adv + values = [1, 1, 1]
    # whitened: mean 0.4, unbiased var 0.02 / 2 = 0.01 -> [1, 0, -1]
    adv, returns = gae_advantages(t([[0.0, 0.0, 1.0]]), t([[0.5, 0.6, 0.7]]), ones(1, 3), gamma=1.0, lam=1.0)
    assert_close(returns, t([[1.0, 1.0, 1.0]]))
    s = math.sqrt(0.01 + 1e-8)  # the whitening epsilon
    assert_close(adv, t([[0.1 / s, 0.0, -0.1 / s]]))


def test_gae_discounted_with_padding() -> None:
    # gamma 0.9, lam 0.8 (gamma * lam = 0.72)
    # row 0: rewards [0, 0, 1], values [0.5, 0.6, 0.7]
    #   t2: delta = 1 - 0.7 = 0.3                  A = 0.3
    #   t1: delta = 0.9 * 0.7 - 0.6 = 0.03         A = 0.03 + 0.72 * 0.3   = 0.246
    #   t0: delta = 0.9 * 0.6 - 0.5 = 0.04         A = 0.04 + 0.72 * 0.246 = 0.21712
    #   returns [0.71712, 0.846, 1.0]
    # row 1: rewards [0, 2, pad], values [1.0, 0.5, pad]
    #   t1: delta = 2 - 0.5 = 1.5                  A = 1.5
    #   t0: delta = 0.9 * 0.5 - 1.0 = -0.55        A = -0.55 + 0.72 * 1.5 = 0.53
    #   returns [1.53, 2.0, 0]
    # whitened over [0.21712, 0.246, 0.3, 0.53, 1.5]: mean 0.558624, unbiased std 0.540429
    mask = t([[1, 1, 1], [1, 1, 0]])
    rewards = t([[0.0, 0.0, 1.0], [0.0, 2.0, 9.0]])
    values = t([[0.5, 0.6, 0.7], [1.0, 0.5, 7.0]])
    adv, returns = gae_advantages(rewards, values, mask, gamma=0.9, lam=0.8)
    assert_close(returns, t([[0.71712, 0.846, 1.0], [1.53, 2.0, 0.0]]))
    assert_close(adv, t([[-0.631913, -0.578474, -0.478553], [-0.052965, 1.741906, 0.0]]), atol=1e-6, rtol=0)


def test_gae_skips_masked_tokens_in_the_middle() -> None:
    # mask [1, 0, 1]; the middle token's reward 5 and value 9 are ignored:
    # t2: delta = 1 - 0.7 = 0.3, A = 0.3; t0: delta = 0.7 - 0.5 = 0.2, A = 0.2 + 0.3 = 0.5
    # returns = [0.5 + 0.5, 0, 0.3 + 0.7] = [1, 0, 1]
    _, returns = gae_advantages(t([[0.0, 5.0, 1.0]]), t([[0.5, 9.0, 0.7]]), t([[1, 0, 1]]), gamma=1.0, lam=1.0)
    assert_close(returns, t([[1.0, 0.0, 1.0]]))


# --- dispatcher and argument checks ---------------------------------------------------------


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "reinforce_plus_plus_baseline"])
def test_dispatcher_matches_the_direct_call(estimator: str) -> None:
    scores, group_ids, mask = (
        t([1.0, 0.0, 2.0, 2.0, 5.0]),
        torch.tensor([0, 0, 1, 1, 1]),
        t([[1, 1], [1, 0]] * 2 + [[1, 1]]),
    )
    direct = {
        "grpo": grpo_advantages,
        "rloo": rloo_advantages,
        "reinforce_plus_plus_baseline": reinforce_plus_plus_baseline_advantages,
    }[estimator](scores, group_ids, mask)
    via = compute_advantages(estimator, scores=scores, response_mask=mask, group_ids=group_ids)  # type: ignore[arg-type]
    assert_close(via, direct)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"estimator": "gae"}, "gae_advantages"),
        ({"estimator": "ppo"}, "estimator"),
        ({"estimator": "grpo"}, "group_ids"),
        ({"estimator": "grpo", "group_ids": torch.tensor([0, 0]), "kl_penalty": torch.zeros(2, 2)}, "kl_penalty"),
        ({"estimator": "rloo", "group_ids": torch.tensor([0, 0, 0])}, "group_ids"),
        ({"estimator": "rloo", "group_ids": torch.tensor([0, 0]), "scores": torch.zeros(3)}, "scores"),
    ],
)
def test_dispatcher_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"scores": torch.zeros(2), "response_mask": torch.ones(2, 2)} | kwargs
    with pytest.raises(ValueError, match=match):
        compute_advantages(**args)  # type: ignore[arg-type]


def test_gae_rejects_mismatched_values_and_bad_lambda() -> None:
    with pytest.raises(ValueError, match="values"):
        gae_advantages(torch.zeros(2, 3), torch.zeros(2, 2), torch.ones(2, 3), gamma=1.0, lam=1.0)
    with pytest.raises(ValueError, match="lam"):
        gae_advantages(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3), gamma=1.0, lam=1.5)
