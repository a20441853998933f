"""Token sequences as padded tensors, and the per-token log-probs of a model over them.

A sample is one whole episode as one sequence (prompt, replies, observations between them) and
a mask of the tokens the model wrote: only those are scored and trained on. Position ``t`` of
the log-prob tensors is the probability of token ``t + 1``, so masks shift by one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel


@dataclass(frozen=True, slots=True)
class Sample:
    token_ids: tuple[int, ...]
    model_written: tuple[bool, ...]
    """Per token of ``token_ids``: written by the model (trained on) or given to it."""

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.model_written):
            raise ValueError(
                f"model_written: needs one flag per token, got {len(self.model_written)} for {len(self.token_ids)}"
            )
        if len(self.token_ids) < 2:
            raise ValueError("token_ids: a sample needs at least a prompt token and a reply token")


@dataclass(frozen=True, slots=True)
class TokenBatch:
    input_ids: torch.Tensor
    """[batch, length] right-padded."""
    attention_mask: torch.Tensor
    """[batch, length] 1 on real tokens."""
    response_mask: torch.Tensor
    """[batch, length - 1] float, 1 where the predicted token was written by the model."""

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    def rows(self, index: torch.Tensor | slice) -> TokenBatch:
        return TokenBatch(self.input_ids[index], self.attention_mask[index], self.response_mask[index])

    def to(self, device: torch.device) -> TokenBatch:
        return TokenBatch(self.input_ids.to(device), self.attention_mask.to(device), self.response_mask.to(device))

    def trimmed(self) -> TokenBatch:
        """The same rows without the padding columns all of them share (right padding)."""
        width = max(2, int(self.attention_mask.sum(dim=1).max()))
        return TokenBatch(self.input_ids[:, :width], self.attention_mask[:, :width], self.response_mask[:, : width - 1])


def micro_batches(
    batch: TokenBatch, *, max_rows: int, max_tokens: int | None = None, overhead_tokens: int | None = None
) -> list[torch.Tensor]:
    """Row indices of each micro-batch: rows sorted longest first and cut into runs of at most
    ``max_rows`` rows whose padded size (rows x the longest row) stays within ``max_tokens``.

    Like verl's dynamic batch size: a long-tailed batch cut in arrival order pads every
    micro-batch to the step's longest sequence (2-3x the tokens on multi-turn and retrieval
    episodes, measured); sorted and trimmed, the padding is what neighbouring lengths differ by.
    ``overhead_tokens`` is what one more forward/backward costs before its first token (launch
    and framework overhead, in tokens' worth of compute): with it, the cuts are the ones that
    minimise padded tokens plus that overhead per micro-batch (short and long rows stop sharing
    a padded micro-batch when a cut is cheaper); None: the fewest micro-batches within the
    limits (and of those, the least padded).
    Which rows share a micro-batch does not change the gradient: the trainers weight each
    micro-batch's loss by its share of the whole.
    """
    lengths: list[int] = batch.attention_mask.sum(dim=1).tolist()
    order = sorted(range(batch.size), key=lambda i: (-lengths[i], i))
    sorted_lengths = [lengths[i] for i in order]
    if overhead_tokens is None:
        # One more micro-batch costs more than any padding can: the fewest, then the least padded.
        overhead_tokens = len(sorted_lengths) * max(sorted_lengths, default=0) + 1
    return [
        torch.tensor(order[a:b], dtype=torch.long)
        for a, b in _cheapest_cuts(sorted_lengths, max_rows, max_tokens, overhead_tokens)
    ]


def _cheapest_cuts(
    lengths: list[int], max_rows: int, max_tokens: int | None, overhead_tokens: int
) -> list[tuple[int, int]]:
    """Contiguous runs [a, b) of ``lengths`` (sorted longest first) minimising the sum of
    ``(b - a) * lengths[a] + overhead_tokens`` within the limits (a row alone always fits):
    the exact optimum by dynamic programming over where the last run starts."""
    n = len(lengths)
    best = [0.0] + [math.inf] * n
    start = [0] * (n + 1)
    for b in range(1, n + 1):
        for a in range(b - 1, max(-1, b - 1 - max_rows), -1):
            rows = b - a
            if rows > 1 and max_tokens is not None and rows * lengths[a] > max_tokens:
                break  # earlier starts are longer rows and more of them: over the budget too
            cost = best[a] + rows * lengths[a] + overhead_tokens
            if cost < best[b]:
                best[b], start[b] = cost, a
    runs: list[tuple[int, int]] = []
    b = n
    while b > 0:
        runs.append((start[b], b))
        b = start[b]
    return runs[::-1]


def collate(samples: Sequence[Sample], *, pad_token_id: int) -> TokenBatch:
    if not samples:
        raise ValueError("samples: a batch needs at least one sample")
    width = max(len(s.token_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(samples), width), dtype=torch.long)
    response = torch.zeros((len(samples), width - 1), dtype=torch.float32)
    for i, sample in enumerate(samples):
        n = len(sample.token_ids)
        ids[i, :n] = torch.tensor(sample.token_ids, dtype=torch.long)
        attention[i, :n] = 1
        response[i, : n - 1] = torch.tensor(sample.model_written[1:], dtype=torch.float32)
    return TokenBatch(ids, attention, response)


def forward_log_probs(
    model: PreTrainedModel, batch: TokenBatch, *, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every next token ([batch, length - 1]) and, optionally, the entropy there."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    logits = out.logits[:, :-1, :].float() / temperature
    log_z = torch.logsumexp(logits, dim=-1)
    chosen = torch.gather(logits, -1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = log_z - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)
    return chosen - log_z, entropy


def pad_columns(values: torch.Tensor, width: int) -> torch.Tensor:
    """``[rows, n]`` per-position values of a trimmed micro-batch, zero-padded back to ``width``."""
    return torch.nn.functional.pad(values, (0, width - values.shape[1]))


def micro_weight(micro_mask: torch.Tensor, whole_mask: torch.Tensor, agg_mode: str) -> float:
    """The share of the whole batch's loss a micro-batch's loss stands for, so that gradients
    accumulated over micro-batches are those of the whole: its share of the valid tokens for
    ``token-mean``, of the sequences with a valid token for the ``seq-mean`` modes, of the rows
    for ``seq-mean-token-sum-norm`` (whose denominator is rows x length)."""
    if agg_mode == "token-mean":
        return float(micro_mask.sum()) / float(whole_mask.sum().clamp(min=1.0))
    if agg_mode == "seq-mean-token-sum-norm":
        return micro_mask.shape[0] / whole_mask.shape[0]
    with_tokens = float((micro_mask.sum(dim=1) > 0).sum())
    return with_tokens / max(1.0, float((whole_mask.sum(dim=1) > 0).sum()))


def rank_share(parts: list[torch.Tensor], share: tuple[int, int] | None) -> list[torch.Tensor | None]:
    """The micro-batches one process runs: all of ``parts`` alone; across a worker group
    (``share`` = (rank, ranks)) micro-batches ``rank, rank + ranks, ...``, topped up with None
    (a run of ``parts[0]`` whose result is discarded) so that every rank of a sharded model
    runs as many forwards and backwards as the others (each is a collective)."""
    if share is None:
        return list(parts)
    rank, ranks = share
    mine: list[torch.Tensor | None] = list(parts[rank::ranks])
    return mine + [None] * (-(-len(parts) // ranks) - len(mine))


@torch.no_grad()
def batch_log_probs(
    model: PreTrainedModel,
    batch: TokenBatch,
    *,
    micro_batch_size: int,
    micro_batch_tokens: int | None = None,
    micro_batch_overhead_tokens: int | None = None,
    temperature: float = 1.0,
    share: tuple[int, int] | None = None,
) -> torch.Tensor:
    """:func:`forward_log_probs` in :func:`micro_batches`, without gradients (old and
    reference log-probs). Past a row's end the values mean nothing: masks leave them out.

    ``share`` = (rank, ranks): only micro-batches ``rank, rank + ranks, ...`` are computed (the
    other rows stay 0), topped up with discarded forwards so that every rank of a sharded
    model runs as many forwards as the others."""
    was_training = model.training
    model.eval()
    out = torch.zeros(batch.response_mask.shape, dtype=torch.float32, device=batch.response_mask.device)
    parts = micro_batches(
        batch, max_rows=micro_batch_size, max_tokens=micro_batch_tokens, overhead_tokens=micro_batch_overhead_tokens
    )
    for index in rank_share(parts, share):
        logp, _ = forward_log_probs(
            model, batch.rows(parts[0] if index is None else index).trimmed(), temperature=temperature
        )
        if index is not None:
            out[index, : logp.shape[1]] = logp
    model.train(was_training)
    return out
