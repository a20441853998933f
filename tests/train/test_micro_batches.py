"""Micro-batches cut from length-sorted rows, trimmed of shared padding: fewer tokens through the
model, the same log-probs and the same update as one micro-batch holding every row."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from jigsaw_engine.rl.policy_loss import LOSS_AGG_MODES
from jigsaw_engine.train.policy_trainer import ActorConfig, PolicyTrainer
from jigsaw_engine.train.token_batch import Sample, TokenBatch, batch_log_probs, collate, micro_batches


def long_tailed_batch(vocab: int, *, rows: int = 24, seed: int = 0) -> TokenBatch:
    """Mostly short episodes and a few long ones, as multi-turn steps are."""
    rng = random.Random(seed)
    samples = []
    for i in range(rows):
        n = rng.randint(60, 80) if i % 8 == 0 else rng.randint(6, 14)
        written = tuple(t >= n // 3 for t in range(n))
        samples.append(Sample(tuple(rng.randrange(3, vocab) for _ in range(n)), written))
    return collate(samples, pad_token_id=0)


def padded_tokens(batch: TokenBatch, groups: list[torch.Tensor]) -> int:
    return sum(len(g) * int(batch.attention_mask[g].sum(dim=1).max()) for g in groups)


def test_sorted_micro_batches_cover_every_row_once_within_both_limits():
    batch = long_tailed_batch(50)
    groups = micro_batches(batch, max_rows=8, max_tokens=200)
    rows = torch.cat(groups).tolist()
    assert sorted(rows) == list(range(batch.size))
    lengths = batch.attention_mask.sum(dim=1)
    for g in groups:
        assert len(g) <= 8
        assert len(g) * int(lengths[g].max()) <= 200 or len(g) == 1  # a row longer than the budget goes alone
    in_order = [torch.arange(s, min(s + 8, batch.size)) for s in range(0, batch.size, 8)]
    # Arrival order padded every micro-batch to a long episode; sorted, only the long ones pay.
    assert padded_tokens(batch, groups) < 0.5 * padded_tokens(batch, in_order)


def test_a_cut_is_made_where_it_costs_less_than_the_padding_it_saves():
    # Rows of 100, 10, 10 and 10 tokens, each forward/backward costing 32 tokens' worth before
    # its first: together 4 x 100 + 32 = 432; the long row alone, then the short ones,
    # 100 + 32 + 3 x 10 + 32 = 194; each alone, 130 + 3 x 42 = 256. The middle one is cheapest.
    lengths = [10, 100, 10, 10]
    batch = collate([Sample(tuple(range(3, 3 + n)), (True,) * n) for n in lengths], pad_token_id=0)
    cheapest = micro_batches(batch, max_rows=8, overhead_tokens=32)
    assert [g.tolist() for g in cheapest] == [[1], [0, 2, 3]]
    # A forward that costs more than any padding: the fewest micro-batches, as without a cost.
    assert [g.tolist() for g in micro_batches(batch, max_rows=8, overhead_tokens=10_000)] == [[1, 0, 2, 3]]
    # The limits still hold: at most two rows, so the short ones cannot all share.
    assert [len(g) for g in micro_batches(batch, max_rows=2, overhead_tokens=32)] == [1, 2, 1]


def test_cutting_by_cost_pads_fewer_tokens_on_a_long_tailed_batch():
    batch = long_tailed_batch(50)
    fewest = micro_batches(batch, max_rows=16, max_tokens=2048)
    cheapest = micro_batches(batch, max_rows=16, max_tokens=2048, overhead_tokens=32)
    assert sorted(torch.cat(cheapest).tolist()) == list(range(batch.size))
    assert padded_tokens(batch, cheapest) + 32 * len(cheapest) < padded_tokens(batch, fewest) + 32 * len(fewest)
    assert padded_tokens(batch, cheapest) < padded_tokens(batch, fewest)


def test_log_probs_are_the_same_however_the_rows_are_grouped(arith_policy):
    model = arith_policy.fresh_model()
    batch = long_tailed_batch(len(arith_policy.tokenizer))
    one_group = batch_log_probs(model, batch, micro_batch_size=batch.size)
    grouped = batch_log_probs(model, batch, micro_batch_size=4, micro_batch_tokens=120)
    mask = batch.response_mask.bool()
    assert torch.allclose(grouped[mask], one_group[mask], atol=1e-5)


@pytest.mark.parametrize("agg_mode", LOSS_AGG_MODES)
def test_an_update_in_small_sorted_micro_batches_equals_one_over_the_whole_batch(arith_policy, agg_mode):
    """Each micro-batch's loss is weighted by its share of the whole (tokens, sequences or rows
    as the mode counts them), so the accumulated gradient is the whole batch's."""
    batch = long_tailed_batch(len(arith_policy.tokenizer), seed=1)
    advantages = torch.randn(batch.response_mask.shape, generator=torch.Generator().manual_seed(0))
    base = arith_policy.fresh_model()
    old = batch_log_probs(base, batch, micro_batch_size=batch.size)
    grads = {}
    for name, cfg in {
        "whole": ActorConfig(lr=1e-2, micro_batch_size=batch.size, loss_agg_mode=agg_mode),
        "grouped": ActorConfig(lr=1e-2, micro_batch_size=5, micro_batch_tokens=150, loss_agg_mode=agg_mode),
        "cut by cost": ActorConfig(
            lr=1e-2, micro_batch_size=batch.size, micro_batch_overhead_tokens=16, loss_agg_mode=agg_mode
        ),
    }.items():
        model = copy.deepcopy(base)
        PolicyTrainer(model, cfg).update(batch, advantages, old)
        # The gradients the step left (Adam's first step would hide a difference in size).
        grads[name] = {k: p.grad for k, p in model.named_parameters() if p.grad is not None}
    assert max(float(g.abs().max()) for g in grads["whole"].values()) > 1e-3
    for name in ("grouped", "cut by cost"):
        assert grads["whole"].keys() == grads[name].keys()
        for key, whole in grads["whole"].items():
            assert torch.allclose(grads[name][key], whole, rtol=1e-3, atol=1e-6), (name, key)


def test_a_token_budget_below_one_is_refused():
    with pytest.raises(ValueError, match="micro_batch_tokens"):
        ActorConfig(micro_batch_tokens=0)
    with pytest.raises(ValueError, match="micro_batch_overhead_tokens"):
        ActorConfig(micro_batch_overhead_tokens=-1)
