"""PPO's critic: a value per token from a copy of the policy's network with a scalar head.

Initialised from the (warmed-up) policy, as verl does, so it starts from features that already
know the task; the head starts at zero, so the first values are 0 and GAE's first advantages
are the plain returns.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from jigsaw_engine.rl import metrics as names
from jigsaw_engine.rl.policy_loss import value_loss
from jigsaw_engine.train.token_batch import TokenBatch, micro_batches, pad_columns


@dataclass(frozen=True, slots=True)
class CriticConfig:
    lr: float = 1e-5
    """AdamW learning rate (verl's default for real models; tiny ones want ~1e-3)."""
    value_clip: float = 0.5
    """How far one update may move a value (PPO's clipped value loss)."""
    grad_clip: float = 1.0
    micro_batch_size: int = 16
    micro_batch_tokens: int | None = None
    """Most tokens per forward/backward, padding counted (as the actor's)."""
    micro_batch_overhead_tokens: int | None = None
    """A forward/backward's fixed cost in tokens (as the actor's)."""
    gamma: float = 1.0
    lam: float = 0.95

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.value_clip <= 0 or self.micro_batch_size < 1:
            raise ValueError("critic: lr and value_clip must be > 0 and micro_batch_size >= 1")
        if self.micro_batch_tokens is not None and self.micro_batch_tokens < 1:
            raise ValueError(f"critic.micro_batch_tokens: must be >= 1 or None, got {self.micro_batch_tokens}")
        if self.micro_batch_overhead_tokens is not None and self.micro_batch_overhead_tokens < 0:
            raise ValueError(
                f"critic.micro_batch_overhead_tokens: must be >= 0 or None, got {self.micro_batch_overhead_tokens}"
            )


class Critic(torch.nn.Module):
    def __init__(self, policy: PreTrainedModel) -> None:
        super().__init__()
        self.body = copy.deepcopy(policy)
        hidden = int(policy.config.hidden_size)
        self.head = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        """Value at each position ``t`` of ``[batch, length - 1]``: the return expected after token ``t + 1``."""
        out = self.body(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True, use_cache=False
        )
        values: torch.Tensor = self.head(out.hidden_states[-1][:, 1:, :].float()).squeeze(-1)
        return values


class CriticTrainer:
    def __init__(self, policy: PreTrainedModel, config: CriticConfig) -> None:
        self.config = config
        self.critic = Critic(policy)
        self.optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.lr, weight_decay=0.0)

    def _micro_batches(self, batch: TokenBatch) -> list[torch.Tensor]:
        cfg = self.config
        return micro_batches(
            batch,
            max_rows=cfg.micro_batch_size,
            max_tokens=cfg.micro_batch_tokens,
            overhead_tokens=cfg.micro_batch_overhead_tokens,
        )

    @torch.no_grad()
    def values(self, batch: TokenBatch) -> torch.Tensor:
        self.critic.eval()
        out = torch.zeros(batch.response_mask.shape, dtype=torch.float32)
        for index in self._micro_batches(batch):
            values = self.critic(batch.rows(index).trimmed())
            out[index, : values.shape[1]] = values
        return out * batch.response_mask

    def update(self, batch: TokenBatch, returns: torch.Tensor, old_values: torch.Tensor) -> dict[str, float]:
        """One optimizer step on the whole batch (micro-batched); the critic's metrics."""
        cfg = self.config
        self.critic.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = float(batch.response_mask.sum().clamp(min=1.0))
        loss_sum, clip_sum = 0.0, 0.0
        width = batch.response_mask.shape[1]
        for part in self._micro_batches(batch):
            micro = batch.rows(part)
            weight = float(micro.response_mask.sum()) / total
            if weight == 0.0:
                continue
            values = self.critic(micro.trimmed())
            values = pad_columns(values, width)
            out = value_loss(values, old_values[part], returns[part], micro.response_mask, clip_range=cfg.value_clip)
            (out.vf_loss * weight).backward()
            loss_sum += float(out.vf_loss.detach()) * weight
            clip_sum += float(out.vf_clipfrac) * weight
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.critic.eval()
        return {names.VF_LOSS: loss_sum, names.VF_CLIPFRAC: clip_sum}

    def state_dict(self) -> dict[str, object]:
        return {"critic": self.critic.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.critic.load_state_dict(state["critic"])  # type: ignore[arg-type]
        self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[arg-type]
