"""PPO's critic: a value per token from a copy of the policy's network with a scalar head.

Initialised from the (warmed-up) policy, as verl does, so it starts from features that already
know the task; the head starts at zero, so the first values are 0 and GAE's first advantages
are the plain returns. Across a worker group it is sharded with FSDP2 as the policy is
(:mod:`jigsaw_engine.train.fsdp`): each rank holds a slice of it and of its optimizer state,
and runs its share of the micro-batches.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from transformers import PreTrainedModel

from jigsaw_engine.models.compute import CPU, ComputeDevice
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.rl.policy_loss import value_loss
from jigsaw_engine.train.token_batch import TokenBatch, micro_batches, pad_columns, rank_share

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


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
        # The decoder's last hidden state (after its final norm): the LM head is never needed.
        out = self.body.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
        values: torch.Tensor = self.head(out.last_hidden_state[:, 1:, :].float()).squeeze(-1)
        return values


class ValueTrainer(Protocol):
    """What a job's step asks of its critic: :class:`CriticTrainer` in the job's process, or
    the one sharded across the policy's worker group
    (:class:`~jigsaw_engine.runtime.ray.trainer_group.CriticGroup`)."""

    config: CriticConfig

    def values(self, batch: TokenBatch) -> torch.Tensor: ...

    def update(self, batch: TokenBatch, returns: torch.Tensor, old_values: torch.Tensor) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class CriticTrainer:
    def __init__(
        self,
        policy: PreTrainedModel,
        config: CriticConfig,
        *,
        mesh: DeviceMesh | None = None,
        compute: ComputeDevice = CPU,
    ) -> None:
        """``mesh``: train across a worker group with FSDP2; every rank builds the critic from
        the same policy and calls the same methods with the same batch. ``compute`` as the
        policy trainer's: where the critic computes; what it returns is in host memory."""
        self.config = config
        self.mesh = mesh
        self.compute = compute
        self.critic = compute.to_device(Critic(policy))
        if mesh is not None:
            from torch.distributed.fsdp import fully_shard

            from jigsaw_engine.train.fsdp import shard_layers

            body = self.critic.body
            shard_layers(body, mesh)
            # The embeddings and the LM head in one unit: a tiny model ties them (the critic
            # never runs the LM head; it stays so that checkpoints keep their names).
            fully_shard([body.base_model, body.get_output_embeddings()], mesh=mesh)
            fully_shard(self.critic, mesh=mesh)  # the value head, with the root
        # After sharding: the optimizer holds (and keeps state for) each rank's slices only.
        self.optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.lr, weight_decay=0.0)

    def _micro_batches(self, batch: TokenBatch) -> list[torch.Tensor]:
        cfg = self.config
        return micro_batches(
            batch,
            max_rows=cfg.micro_batch_size,
            max_tokens=cfg.micro_batch_tokens,
            overhead_tokens=cfg.micro_batch_overhead_tokens,
        )

    def _share(self) -> tuple[int, int] | None:
        return (self.mesh.get_local_rank(), self.mesh.size()) if self.mesh is not None else None

    @torch.no_grad()
    def values(self, batch: TokenBatch) -> torch.Tensor:
        """Across a worker group each rank computes its share of the micro-batches and the rows
        are summed over ranks (each row is computed by exactly one, zeros elsewhere)."""
        self.critic.eval()
        batch = self.compute.to_device(batch)
        out = torch.zeros(batch.response_mask.shape, dtype=torch.float32, device=batch.response_mask.device)
        parts = self._micro_batches(batch)
        for index in rank_share(parts, self._share()):
            with self.compute.autocast():
                values = self.critic(batch.rows(parts[0] if index is None else index).trimmed())
            if index is not None:
                out[index, : values.shape[1]] = values
        if self.mesh is not None:
            torch.distributed.all_reduce(out, group=self.mesh.get_group())
        result: torch.Tensor = self.compute.to_host(out * batch.response_mask)
        return result

    def update(self, batch: TokenBatch, returns: torch.Tensor, old_values: torch.Tensor) -> dict[str, float]:
        """One optimizer step on the whole batch (micro-batched); the critic's metrics."""
        cfg = self.config
        batch, returns, old_values = (self.compute.to_device(t) for t in (batch, returns, old_values))
        self.critic.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = float(batch.response_mask.sum().clamp(min=1.0))
        metrics = {names.VF_LOSS: 0.0, names.VF_CLIPFRAC: 0.0}
        width = batch.response_mask.shape[1]
        # Only micro-batches with a token to learn from; across a worker group the
        # reduce-scatter averages the gradients over ranks: scaled by their number, it sums.
        parts = [p for p in self._micro_batches(batch) if float(batch.response_mask[p].sum()) > 0]
        ranks = self.mesh.size() if self.mesh is not None else 1
        for index in rank_share(parts, self._share()):
            part = parts[0] if index is None else index
            micro = batch.rows(part)
            weight = 0.0 if index is None else float(micro.response_mask.sum()) / total
            with self.compute.autocast():
                values = pad_columns(self.critic(micro.trimmed()), width)
            out = value_loss(values, old_values[part], returns[part], micro.response_mask, clip_range=cfg.value_clip)
            (out.vf_loss * weight * ranks).backward()
            metrics[names.VF_LOSS] += float(out.vf_loss.detach()) * weight
            metrics[names.VF_CLIPFRAC] += float(out.vf_clipfrac) * weight
        if self.mesh is not None:
            from jigsaw_engine.train.fsdp import sum_over_ranks

            metrics = sum_over_ranks(metrics, self.mesh)
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.critic.eval()
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """Across a worker group: whole tensors on every rank (a collective), the optimizer's
        state keyed by parameter name, so a group of any size can load it."""
        if self.mesh is not None:
            from jigsaw_engine.train.fsdp import full_state_dict

            state = full_state_dict(self.critic, self.optimizer)
        else:
            state = {"critic": self.critic.state_dict(), "optimizer": self.optimizer.state_dict()}
        host: dict[str, Any] = self.compute.to_host(state)
        return host

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.mesh is not None:
            from jigsaw_engine.train.fsdp import load_full_state_dict

            load_full_state_dict(self.critic, self.optimizer, state)
            return
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
