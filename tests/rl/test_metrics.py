"""Metric names and the helpers that fill them."""

from __future__ import annotations

import pytest
import torch

from jigsaw_engine.rl import metrics as m
from jigsaw_engine.rl.policy_loss import PolicyLossOutput, ValueLossOutput


def test_names_follow_verl() -> None:
    assert m.PG_CLIPFRAC_LOWER == "actor/pg_clipfrac_lower"
    assert m.SCORE_MEAN == "critic/score/mean"
    assert m.RESPONSE_LENGTH_CLIP_RATIO == "response_length/clip_ratio"
    assert m.timing_key("update_actor") == "timing_s/update_actor"


def test_data_metrics() -> None:
    # lengths [3, 1, 2] with max 3 -> mean 2, max 3, clip ratio 1/3
    # valid advantages [1, 1, 1, -2, 0.5, 0.5] -> mean 2 / 6, max 1, min -2
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]])
    adv = torch.tensor([[1.0, 1.0, 1.0], [-2.0, 9.0, 9.0], [0.5, 0.5, -9.0]])
    got = m.compute_data_metrics(
        scores=torch.tensor([1.0, 0.0, 0.5]),
        advantages=adv,
        response_mask=mask,
        prompt_lengths=torch.tensor([10, 20, 30]),
        max_response_length=3,
        rewards=torch.tensor([0.9, -0.1, 0.4]),
    )
    assert got == pytest.approx(
        {
            m.SCORE_MEAN: 0.5,
            m.REWARDS_MEAN: 0.4,
            m.ADVANTAGES_MEAN: 1 / 3,
            m.ADVANTAGES_MAX: 1.0,
            m.ADVANTAGES_MIN: -2.0,
            m.RESPONSE_LENGTH_MEAN: 2.0,
            m.RESPONSE_LENGTH_MAX: 3.0,
            m.RESPONSE_LENGTH_CLIP_RATIO: 1 / 3,
            m.PROMPT_LENGTH_MEAN: 20.0,
        }
    )


def test_a_multi_turn_response_is_clipped_only_where_a_reply_was_cut() -> None:
    # Two turns of at most 3 tokens each: 4 tokens written, no reply cut, then 3 with one cut.
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    zeros = torch.zeros(2)
    common = dict(scores=zeros, advantages=torch.zeros(2, 4), response_mask=mask, prompt_lengths=zeros)
    by_length = m.compute_data_metrics(**common, max_response_length=3)
    assert by_length[m.RESPONSE_LENGTH_CLIP_RATIO] == 1.0  # what the lengths alone would say
    cut = m.compute_data_metrics(**common, max_response_length=3, truncated=torch.tensor([False, True]))
    assert cut[m.RESPONSE_LENGTH_CLIP_RATIO] == 0.5
    with pytest.raises(ValueError, match="truncated: expected shape"):
        m.compute_data_metrics(**common, max_response_length=3, truncated=torch.tensor([True]))


def test_actor_critic_timing_and_throughput_metrics() -> None:
    policy = PolicyLossOutput(
        pg_loss=torch.tensor(-0.1), pg_clipfrac=torch.tensor(0.25), pg_clipfrac_lower=torch.tensor(0.0),
        ppo_kl=torch.tensor(0.01),
    )  # fmt: skip
    actor = m.compute_actor_metrics(policy, entropy=torch.tensor(1.5), lr=1e-6)
    assert actor == pytest.approx(
        {m.PG_LOSS: -0.1, m.PG_CLIPFRAC: 0.25, m.PG_CLIPFRAC_LOWER: 0.0, m.PPO_KL: 0.01, m.ENTROPY: 1.5, m.LR: 1e-6}
    )
    critic = m.compute_critic_metrics(ValueLossOutput(vf_loss=torch.tensor(0.19), vf_clipfrac=torch.tensor(0.5)))
    assert critic == pytest.approx({m.VF_LOSS: 0.19, m.VF_CLIPFRAC: 0.5})
    assert m.compute_timing_metrics({"gen": 12.0, "step": 20.0}) == {"timing_s/gen": 12.0, "timing_s/step": 20.0}
    # 8000 tokens in 2 s on 2 devices -> 2000 tokens/s per device
    assert m.compute_throughput_metrics(total_num_tokens=8000, step_seconds=2.0, num_devices=2) == {
        m.TOTAL_NUM_TOKENS: 8000.0,
        m.THROUGHPUT: 2000.0,
    }
    with pytest.raises(ValueError, match="stage"):
        m.compute_timing_metrics({"rollout": 1.0})  # type: ignore[dict-item]
