"""The actor update: PPO-style clipped policy gradient over micro-batches, AdamW, clipping.

One :meth:`PolicyTrainer.update` is one RL step's training: the batch is split into
``ppo_mini_batch_size`` optimizer steps (each accumulating gradients over micro-batches), for
``ppo_epochs`` passes. Old log-probs are taken once before the update, so the ratio is 1 on the
first mini-batch and the clip only matters on later ones, as in verl. Given the log-probs the
rollout engine sampled with (an asynchronous job's older policy), the loss is the decoupled one
(:func:`~jigsaw_engine.rl.policy_loss.decoupled_ppo_policy_loss`), the old log-probs its
proximal policy.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from transformers import PreTrainedModel

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

from jigsaw_engine.models.compute import CPU, ComputeDevice
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.rl.kl import KLEstimator, kl_loss
from jigsaw_engine.rl.policy_loss import (
    BEHAV_IMP_WEIGHT_CAP,
    LossAggMode,
    PolicyLossOutput,
    aggregate_loss,
    decoupled_ppo_policy_loss,
    ppo_policy_loss,
)
from jigsaw_engine.train.token_batch import (
    TokenBatch,
    batch_log_probs,
    forward_log_probs,
    micro_batches,
    micro_weight,
    pad_columns,
    rank_share,
)


@dataclass(frozen=True, slots=True)
class ActorConfig:
    lr: float = 1e-6
    """AdamW learning rate. 1e-6 suits billion-parameter checkpoints; tiny models want ~1e-3."""
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    """Max global gradient norm per optimizer step."""
    micro_batch_size: int = 16
    """Most samples per forward/backward; gradients accumulate over micro-batches."""
    micro_batch_tokens: int | None = None
    """Most tokens per forward/backward, counting padding (rows x the longest row), as verl's
    ``ppo_max_token_len_per_gpu``; None: rows alone cut micro-batches (see :func:`micro_batches`)."""
    micro_batch_overhead_tokens: int | None = None
    """A forward/backward's fixed cost in tokens' worth of compute: micro-batches are then cut
    where that is cheaper than the padding saved (see :func:`micro_batches`); None: the fewest."""
    ppo_mini_batch_size: int = 0
    """Samples per optimizer step; 0 = the whole batch (one step per epoch)."""
    ppo_epochs: int = 1
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    """Above ``clip_ratio_low`` is DAPO's clip-higher (0.28 there)."""
    clip_ratio_c: float = 3.0
    """Dual-clip bound for negative advantages."""
    behav_imp_weight_cap: float | None = BEHAV_IMP_WEIGHT_CAP
    """Decoupled loss (asynchronous jobs): tokens whose ``pi_prox / pi_behav`` exceeds this are
    left out of the loss (AReaL's rule); None keeps them all."""
    loss_agg_mode: LossAggMode = "token-mean"
    kl_coef: float = 0.0
    """KL-to-reference loss weight; 0 skips the reference model entirely."""
    kl_estimator: KLEstimator = "k3"
    entropy_coeff: float = 0.0

    def __post_init__(self) -> None:
        if self.micro_batch_tokens is not None and self.micro_batch_tokens < 1:
            raise ValueError(f"actor.micro_batch_tokens: must be >= 1 or None, got {self.micro_batch_tokens}")
        if self.micro_batch_overhead_tokens is not None and self.micro_batch_overhead_tokens < 0:
            raise ValueError(
                f"actor.micro_batch_overhead_tokens: must be >= 0 or None, got {self.micro_batch_overhead_tokens}"
            )
        for name in ("micro_batch_size", "ppo_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"actor.{name}: must be >= 1, got {getattr(self, name)}")
        if self.ppo_mini_batch_size < 0:
            raise ValueError(
                f"actor.ppo_mini_batch_size: must be >= 0 (0 = whole batch), got {self.ppo_mini_batch_size}"
            )
        if self.lr <= 0:
            raise ValueError(f"actor.lr: must be > 0, got {self.lr}")
        if self.kl_coef < 0 or self.entropy_coeff < 0:
            raise ValueError("actor.kl_coef and actor.entropy_coeff: must be >= 0 (0 switches the term off)")


def mean_metrics(per_step: list[dict[str, float]]) -> dict[str, float]:
    """Each metric's mean over optimizer steps (the step's reported actor metrics)."""
    if not per_step:
        return {}
    return {key: sum(step[key] for step in per_step) / len(per_step) for key in per_step[0]}


def plan_updates(config: ActorConfig, batch_size: int, *, seed: int) -> list[torch.Tensor]:
    """The rows of each optimizer step: ``ppo_epochs`` shuffled passes in mini-batches.

    Planned up front so the update can be run a few optimizer steps at a time (one train
    sub-stage each) and still be the same update.
    """
    mini = config.ppo_mini_batch_size or batch_size
    generator = torch.Generator().manual_seed(seed)
    plan: list[torch.Tensor] = []
    for _ in range(config.ppo_epochs):
        order = torch.randperm(batch_size, generator=generator)
        plan.extend(order[start : start + mini] for start in range(0, batch_size, mini))
    return plan


class ActorTrainer(Protocol):
    """What a job's step asks of its policy trainer: :class:`PolicyTrainer` in the job's process,
    or a worker group (:class:`~jigsaw_engine.runtime.ray.trainer_group.TrainerGroup`)."""

    config: ActorConfig
    reference: object | None
    """Not None when a KL reference is kept (``ref_log_probs`` then answers)."""

    def old_log_probs(self, batch: TokenBatch) -> torch.Tensor: ...

    def ref_log_probs(self, batch: TokenBatch) -> torch.Tensor | None: ...

    def optimizer_step(  # (full batch, its advantages, old log-probs, ref log-probs, rows[, behaviour]): metrics
        self,
        b: TokenBatch,
        a: torch.Tensor,
        o: torch.Tensor,
        r: torch.Tensor | None,
        rows: torch.Tensor,
        behav: torch.Tensor | None = None,
        /,
    ) -> dict[str, float]: ...

    def plan_updates(self, batch_size: int, *, seed: int) -> list[torch.Tensor]: ...

    def weights(self) -> dict[str, torch.Tensor]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class PolicyTrainer:
    def __init__(
        self,
        model: PreTrainedModel,
        config: ActorConfig,
        *,
        keep_reference: bool = False,
        mesh: DeviceMesh | None = None,
        compute: ComputeDevice = CPU,
    ) -> None:
        """``mesh``: train across a worker group with FSDP2 (:mod:`jigsaw_engine.train.fsdp`);
        every rank builds the same model and calls the same methods with the same batch.
        ``compute``: where the model and its batches live (:mod:`jigsaw_engine.models.compute`);
        what the methods return is in host memory either way."""
        self.compute = compute
        self.model = compute.to_device(model)
        self.config = config
        self.mesh = mesh
        self.reference: PreTrainedModel | None = None
        if config.kl_coef > 0 or keep_reference:
            self.reference = copy.deepcopy(model).eval()
            self.reference.requires_grad_(False)
        if mesh is not None:
            from jigsaw_engine.train.fsdp import shard_model

            shard_model(model, mesh)
            if self.reference is not None:
                shard_model(self.reference, mesh)
        # After sharding: the optimizer holds (and keeps state for) each rank's slices only.
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)

    # -- forwards without gradients ------------------------------------------------------------
    def old_log_probs(self, batch: TokenBatch) -> torch.Tensor:
        return self._log_probs(self.model, batch)

    def ref_log_probs(self, batch: TokenBatch) -> torch.Tensor | None:
        if self.reference is None:
            return None
        return self._log_probs(self.reference, batch)

    def _log_probs(self, model: PreTrainedModel, batch: TokenBatch) -> torch.Tensor:
        """Across a worker group each rank computes its share of the micro-batches and the rows
        are summed over ranks (each row is computed by exactly one, zeros elsewhere)."""
        share = (self.mesh.get_local_rank(), self.mesh.size()) if self.mesh is not None else None
        with self.compute.autocast():
            out = batch_log_probs(
                model,
                self.compute.to_device(batch),
                micro_batch_size=self.config.micro_batch_size,
                micro_batch_tokens=self.config.micro_batch_tokens,
                micro_batch_overhead_tokens=self.config.micro_batch_overhead_tokens,
                share=share,
            )
        if self.mesh is not None:
            torch.distributed.all_reduce(out, group=self.mesh.get_group())
        result: torch.Tensor = self.compute.to_host(out)
        return result

    # -- the update ----------------------------------------------------------------------------
    def update(
        self,
        batch: TokenBatch,
        advantages: torch.Tensor,
        old_logp: torch.Tensor,
        ref_logp: torch.Tensor | None = None,
        *,
        seed: int = 0,
    ) -> dict[str, float]:
        """Train on ``batch``; the mean of each actor metric over optimizer steps."""
        steps = [
            self.optimizer_step(batch, advantages, old_logp, ref_logp, rows)
            for rows in self.plan_updates(batch.size, seed=seed)
        ]
        return mean_metrics(steps)

    def plan_updates(self, batch_size: int, *, seed: int) -> list[torch.Tensor]:
        return plan_updates(self.config, batch_size, seed=seed)

    def optimizer_step(
        self,
        full_batch: TokenBatch,
        all_advantages: torch.Tensor,
        all_old_logp: torch.Tensor,
        ref_logp: torch.Tensor | None,
        rows: torch.Tensor,
        all_behav_logp: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """One optimizer step on ``rows`` of the batch; its actor metrics. ``all_behav_logp``:
        the log-probs each token was sampled with, when an older policy than the old
        (proximal) one generated the batch: the loss is then the decoupled one."""
        device = self.compute.to_device
        full_batch, all_advantages, all_old_logp = device(full_batch), device(all_advantages), device(all_old_logp)
        ref_logp, all_behav_logp = device(ref_logp), device(all_behav_logp)
        batch, advantages, old_logp = full_batch.rows(rows), all_advantages[rows], all_old_logp[rows]
        behav_logp = all_behav_logp[rows] if all_behav_logp is not None else None
        self.model.train()
        cfg = self.config
        self.optimizer.zero_grad(set_to_none=True)
        acc = {names.PG_LOSS: 0.0, names.PG_CLIPFRAC: 0.0, names.PPO_KL: 0.0, names.ENTROPY: 0.0, names.KL_LOSS: 0.0}
        if behav_logp is not None:
            acc |= {names.BEHAV_IMP_WEIGHT: 0.0, names.BEHAV_CAPPED_FRAC: 0.0}
        width = batch.response_mask.shape[1]
        # Across a worker group the reduce-scatter averages over ranks: scaled, it sums.
        ranks = self.mesh.size() if self.mesh is not None else 1
        for part, scale in self._my_micro_batches(batch):
            micro = batch.rows(part)
            weight = micro_weight(micro.response_mask, batch.response_mask, cfg.loss_agg_mode) * scale
            if weight == 0.0 and self.mesh is None:
                continue
            # The forward runs on the trimmed rows (the costly part); the losses see them padded
            # back to the mini-batch's width, so every aggregation mode means what it did.
            with self.compute.autocast():
                logp, entropy = forward_log_probs(self.model, micro.trimmed(), with_entropy=True)
            assert entropy is not None
            logp, entropy = pad_columns(logp, width), pad_columns(entropy, width)
            out = self._policy_loss(
                logp, old_logp[part], None if behav_logp is None else behav_logp[part], advantages[part], micro
            )
            if out.behav_imp_weight is not None and out.behav_capped_frac is not None:
                acc[names.BEHAV_IMP_WEIGHT] += float(out.behav_imp_weight) * weight
                acc[names.BEHAV_CAPPED_FRAC] += float(out.behav_capped_frac) * weight
            entropy_mean = aggregate_loss(entropy, micro.response_mask, cfg.loss_agg_mode)
            loss = out.pg_loss - cfg.entropy_coeff * entropy_mean
            if ref_logp is not None and cfg.kl_coef > 0:
                kl = kl_loss(
                    logp,
                    ref_logp[rows][part],
                    micro.response_mask,
                    estimator=cfg.kl_estimator,
                    agg_mode=cfg.loss_agg_mode,
                )
                loss = loss + cfg.kl_coef * kl
                acc[names.KL_LOSS] += float(kl.detach()) * weight
            (loss * weight * ranks).backward()
            acc[names.PG_LOSS] += float(out.pg_loss.detach()) * weight
            acc[names.PG_CLIPFRAC] += float(out.pg_clipfrac) * weight
            acc[names.PPO_KL] += float(out.ppo_kl) * weight
            acc[names.ENTROPY] += float(entropy_mean.detach()) * weight
        if self.mesh is not None:
            from jigsaw_engine.train.fsdp import full, sum_over_ranks

            acc = sum_over_ranks(acc, self.mesh)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        acc[names.GRAD_NORM] = float(full(grad_norm) if self.mesh is not None else grad_norm)
        acc[names.LR] = cfg.lr
        self.model.eval()
        return acc

    def _policy_loss(
        self, logp: torch.Tensor, old: torch.Tensor, behav: torch.Tensor | None, adv: torch.Tensor, micro: TokenBatch
    ) -> PolicyLossOutput:
        """PPO's clipped loss; the decoupled one (``old`` its proximal policy) given ``behav``."""
        cfg = self.config
        clip: dict[str, Any] = {
            "clip_ratio_low": cfg.clip_ratio_low,
            "clip_ratio_high": cfg.clip_ratio_high,
            "clip_ratio_c": cfg.clip_ratio_c,
            "agg_mode": cfg.loss_agg_mode,
        }
        if behav is None:
            return ppo_policy_loss(logp, old, adv, micro.response_mask, **clip)
        cap = cfg.behav_imp_weight_cap
        return decoupled_ppo_policy_loss(logp, old, behav, adv, micro.response_mask, behav_imp_weight_cap=cap, **clip)

    def _my_micro_batches(self, batch: TokenBatch) -> list[tuple[torch.Tensor, float]]:
        """(rows, 1.0) for each micro-batch this process runs. Across a worker group, rank ``r``
        of ``w`` takes micro-batches ``r, r + w, ...``, topped up with weight-0 ones so that
        every rank runs the same number of forwards and backwards (each is a collective)."""
        cfg = self.config
        parts = micro_batches(
            batch,
            max_rows=cfg.micro_batch_size,
            max_tokens=cfg.micro_batch_tokens,
            overhead_tokens=cfg.micro_batch_overhead_tokens,
        )
        if self.mesh is None:
            return [(part, 1.0) for part in parts]
        # Only micro-batches with a token to learn from: a weight-0 one may have a NaN loss.
        parts = [p for p in parts if micro_weight(batch.rows(p).response_mask, batch.response_mask, cfg.loss_agg_mode)]
        # Every rank sees the same batch, so every rank skips alike when none has a token.
        share = (self.mesh.get_local_rank(), self.mesh.size())
        return [(parts[0], 0.0) if part is None else (part, 1.0) for part in rank_share(parts, share)]

    # -- weights and checkpoints ---------------------------------------------------------------
    def weights(self) -> dict[str, torch.Tensor]:
        """The policy's weights, detached and whole, for the rollout engines (across a worker
        group every rank must call this: gathering the shards is a collective)."""
        if self.mesh is not None:
            from jigsaw_engine.train.fsdp import full

            whole = {name: full(tensor).detach() for name, tensor in self.model.state_dict().items()}
        else:
            whole = {name: tensor.detach() for name, tensor in self.model.state_dict().items()}
        weights: dict[str, torch.Tensor] = self.compute.to_host(whole)
        return weights

    def state_dict(self) -> dict[str, Any]:
        """Across a worker group: whole tensors on every rank (a collective), the optimizer's
        state keyed by parameter name, so a group of any size can load it."""
        if self.mesh is not None:
            from jigsaw_engine.train.fsdp import full_state_dict

            state = full_state_dict(self.model, self.optimizer)
        else:
            state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        host: dict[str, Any] = self.compute.to_host(state)
        return host

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A worker group loads what a worker group of any size saved (each rank keeps its slices)."""
        if self.mesh is not None:
            from jigsaw_engine.train.fsdp import load_full_state_dict

            load_full_state_dict(self.model, self.optimizer, state)
            return
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
