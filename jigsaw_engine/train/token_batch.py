"""Token sequences as padded tensors, and the per-token log-probs of a model over them.

A sample is one whole episode as one sequence (prompt, replies, observations between them) and
a mask of the tokens the model wrote: only those are scored and trained on. Position ``t`` of
the log-prob tensors is the probability of token ``t + 1``, so masks shift by one.
"""

from __future__ import annotations

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


@torch.no_grad()
def batch_log_probs(
    model: PreTrainedModel, batch: TokenBatch, *, micro_batch_size: int, temperature: float = 1.0
) -> torch.Tensor:
    """:func:`forward_log_probs` in micro-batches, without gradients (old and reference log-probs)."""
    was_training = model.training
    model.eval()
    parts = []
    for start in range(0, batch.size, micro_batch_size):
        logp, _ = forward_log_probs(model, batch.rows(slice(start, start + micro_batch_size)), temperature=temperature)
        parts.append(logp)
    model.train(was_training)
    return torch.cat(parts, dim=0)
