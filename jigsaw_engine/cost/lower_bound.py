"""Throughput lower bound ``T_LB(N)`` (``docs/cost-model.md``, "The lower bound").

    T_LB(N) = max( sum_p work_p / N , max_p critical_path_p )

``work_p`` is the ideal GPU-seconds a pipeline's sampled steps need (decode at the largest batch
that fits one rollout worker's KV cache, and for a sync step in no fewer iterations than its
longest sequence has tokens; prefill, log-prob forwards, training): no schedule on
``N`` devices can finish sooner than the total spread perfectly over them. ``critical_path_p``
is the chain of work that cannot be parallelised away however many devices there are: the
slowest sequence decoded alone, its tool waits, training on the pipeline's own GPU count and the
weight sync, step after step. Every time is charged by :class:`RooflineCostModel`'s own
functions (no formula is repeated here), so the bound moves with the cost model.

Two bounds are reported: *practical* (the device profile as calibrated) and *roofline* (every
efficiency and MFU 1, no fixed per-iteration, per-kernel or per-sync overhead, no framework
factor: the physical limit), derived from the same profile with :func:`dataclasses.replace`.

Work and paths are in seconds; GPU-seconds (``*_gpu_s``) are seconds of one device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from jigsaw_engine.cost.cost_model import FRAMEWORK_FACTOR, RooflineCostModel
from jigsaw_engine.cost.device import DeviceProfile
from jigsaw_engine.spec.pipeline import Algorithm, PipelineSpec


class SequenceShape(Protocol):
    """What the bound needs of one sampled sequence; ``workload.plans.SequencePlan`` has it.

    A protocol rather than an import so that ``cost`` does not depend on ``sim``, which is
    downstream of it."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def turn_tokens(self) -> tuple[int, ...]: ...
    @property
    def tool_waits_s(self) -> tuple[float, ...]: ...
    @property
    def tool_output_tokens(self) -> int: ...
    @property
    def total_tokens(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PipelineWork:
    """One step of one pipeline: ideal GPU-seconds of each kind and its critical path."""

    prefill_gpu_s: float
    """Prompts and re-prefilled tool outputs, GPU-seconds (prefill is compute-bound and linear in
    tokens, so the GPU-seconds do not depend on how it is split)."""
    decode_gpu_s: float
    """Every generated token, packed into full batches of :attr:`decode_batch` at the mean
    context, on one rollout worker of ``tp`` GPUs; GPU-seconds."""
    old_logprob_gpu_s: float
    """Old-policy log-prob forward of every trained token, GPU-seconds."""
    ref_logprob_gpu_s: float
    """Reference-policy forward (GRPO and PPO only, as in ``simulate_step``), GPU-seconds."""
    train_gpu_s: float
    """Actor update, plus for PPO the critic's values forward and update, GPU-seconds."""
    decode_batch: int
    """Batch the decode was charged at: the most sequences at the mean context that fit one
    rollout worker's KV cache, and no more than can be in flight at once; for a sync pipeline
    no more than its tokens over its longest sequence's (it needs that many iterations)."""
    rollout_path_s: float
    """Slowest single sequence: its prefills, its decode at batch 1, its tool waits and its own
    log-prob forward on the pipeline's GPUs; seconds of wall time."""
    update_path_s: float
    """Training on the pipeline's ``num_gpus`` (the most it may use), seconds of wall time."""
    sync_s: float
    """Pushing the new weights to the rollout workers, seconds of wall time."""

    @property
    def total_gpu_s(self) -> float:
        """``work_p`` of this step, GPU-seconds."""
        return (
            self.prefill_gpu_s + self.decode_gpu_s + self.old_logprob_gpu_s + self.ref_logprob_gpu_s + self.train_gpu_s
        )

    @property
    def critical_path_s(self) -> float:
        """``critical_path_p`` of this step alone, seconds."""
        return self.rollout_path_s + self.update_path_s + self.sync_s


@dataclass(frozen=True, slots=True)
class PipelineBound:
    """One pipeline's share of the bound over its sampled steps."""

    name: str
    num_steps: int
    work_gpu_s: float
    """``S_p * work_p``: practical GPU-seconds summed over the sampled steps."""
    critical_path_s: float
    """``S_p * critical_path_p`` for a sync pipeline; for an async one the longest chain when
    rollouts may run ``staleness`` policy versions ahead of training (see :func:`chain_s`)."""
    roofline_work_gpu_s: float
    roofline_critical_path_s: float
    steps: tuple[PipelineWork, ...]
    """Practical per-step breakdown (the GPU-time breakdown by kind)."""


@dataclass(frozen=True, slots=True)
class LowerBound:
    """``T_LB(N)`` for a set of pipelines sharing ``num_devices`` devices, seconds."""

    num_devices: int
    practical_s: float
    """With the device profile's efficiencies as calibrated."""
    roofline_s: float
    """Physical limit: every efficiency and MFU 1, no fixed overheads (always <= practical)."""
    pipelines: tuple[PipelineBound, ...]

    @property
    def practical_work_term_s(self) -> float:
        """``sum_p S_p * work_p / N``, seconds."""
        return sum(p.work_gpu_s for p in self.pipelines) / self.num_devices

    @property
    def practical_path_term_s(self) -> float:
        """``max_p S_p * critical_path_p``, seconds."""
        return max((p.critical_path_s for p in self.pipelines), default=0.0)


def roofline_device(device: DeviceProfile) -> DeviceProfile:
    """``device`` at its physical limit: every efficiency 1 and no fixed overheads.

    ``mfu_*`` is set to ``FRAMEWORK_FACTOR`` (not 1) because the cost model multiplies forward
    and training FLOP time by that factor; dividing by it again leaves exactly peak FLOPs."""
    return replace(
        device,
        t_fix_s=0.0,
        c_seq_s=0.0,
        prefill_fix_s=0.0,
        forward_elementwise_s=0.0,
        train_elementwise_s=0.0,
        parallel_fraction=1.0,
        parallel_fraction_by_params=(),
        linear_op_overhead_s=0.0,
        sync_alpha_s=0.0,
        eta_weights=1.0,
        eta_kv=1.0,
        eta_compute=1.0,
        eta_prefill=1.0,
        mfu_forward=FRAMEWORK_FACTOR,
        mfu_train=FRAMEWORK_FACTOR,
    )


def pipeline_work(cost: RooflineCostModel, spec: PipelineSpec, plans: Sequence[SequenceShape]) -> PipelineWork:
    """Ideal work and critical path of one step of ``spec`` whose sequences are ``plans``.

    Stage launch overheads (the profile's ``stage_overhead_s``) and CPU reward grading are left out: they are
    wall time of one execution plan, not device work, and a scheduler can overlap them."""
    model, tp, gpus = spec.model, spec.resources.tp, spec.resources.num_gpus
    if not plans:
        return PipelineWork(0.0, 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0.0)
    trained_tokens = sum(p.total_tokens for p in plans)
    square_tokens = sum(p.total_tokens**2 for p in plans)
    prefill_tokens = sum(p.prompt_tokens + p.tool_output_tokens * len(p.tool_waits_s) for p in plans)
    decode_tokens = sum(sum(p.turn_tokens) for p in plans)
    context_token_sum = sum(_context_token_sum(p) for p in plans)

    # Decode: per-token cost falls as the batch grows (fixed and weight-streaming costs are
    # shared), so the cheapest schedule runs the largest batch that fits, all the time.
    decode_batch = 0
    decode_gpu_s = 0.0
    if decode_tokens:
        mean_context = context_token_sum / decode_tokens
        fits = int(cost.kv_capacity_tokens(model, tp=tp) // max(mean_context, 1.0))
        in_flight = len(plans) * (1 + spec.staleness)  # sync: one step's sequences at a time
        decode_batch = max(1, min(fits, in_flight))
        iterations = decode_tokens / decode_batch
        if spec.staleness == 0:
            # A sequence gains one token per iteration, wherever it runs (migrated or not), so a
            # step needs at least as many iterations as its longest sequence has tokens; in a
            # sync pipeline no other step's sequences share them. An iteration's cost is convex
            # in its batch (the KV term, linear in the context summed over tokens, is the same
            # however they are batched), so for I iterations equal batches T / I are cheapest,
            # and I * t(T / I) grows with I (t(0) > 0): I = max(T / B, longest) is the cheapest
            # count any schedule can reach. The batch is rounded up (fewer, fuller iterations):
            # cheaper still, so the bound stays valid.
            longest = max(sum(p.turn_tokens) for p in plans)
            if longest > iterations:
                decode_batch = min(decode_batch, math.ceil(decode_tokens / longest))
                iterations = decode_tokens / decode_batch
        per_iteration_s = cost.decode_iteration_s(
            model, batch=decode_batch, context_tokens=decode_batch * mean_context, tp=tp
        )
        decode_gpu_s = iterations * per_iteration_s * tp

    # Forwards and updates are linear in 1/num_gpus, so GPU-seconds are their time on one GPU.
    forward_gpu_s = cost.logprob_forward_s(model, tokens=trained_tokens, num_gpus=1, square_tokens=square_tokens)
    uses_reference = spec.algorithm in (Algorithm.GRPO, Algorithm.PPO)
    train_gpu_s = cost.train_s(
        model, tokens=trained_tokens, num_gpus=1, epochs=spec.ppo_epochs, square_tokens=square_tokens
    )
    update_path_s = cost.train_s(
        model, tokens=trained_tokens, num_gpus=gpus, epochs=spec.ppo_epochs, square_tokens=square_tokens
    )
    if spec.algorithm is Algorithm.PPO:
        # The critic (actor-sized, as in simulate_step): a values forward and its own update.
        critic_train_gpu_s = train_gpu_s
        train_gpu_s += forward_gpu_s + critic_train_gpu_s
        update_path_s += critic_train_gpu_s / gpus

    # The slowest sequence's log-prob forwards (old, ref, values: independent) can start as soon
    # as it finishes; the others' overlap its decode, so only its own tokens are on the path.
    rollout_path_s = max(
        _alone_s(cost, spec, p)
        + cost.logprob_forward_s(model, tokens=p.total_tokens, num_gpus=gpus, square_tokens=p.total_tokens**2)
        for p in plans
    )
    return PipelineWork(
        prefill_gpu_s=cost.prefill_s(model, tokens=prefill_tokens, tp=tp) * tp,
        decode_gpu_s=decode_gpu_s,
        old_logprob_gpu_s=forward_gpu_s,
        ref_logprob_gpu_s=forward_gpu_s if uses_reference else 0.0,
        train_gpu_s=train_gpu_s,
        decode_batch=decode_batch,
        rollout_path_s=rollout_path_s,
        update_path_s=update_path_s,
        sync_s=cost.weight_sync_s(model),
    )


def chain_s(steps: Sequence[PipelineWork], staleness: int) -> float:
    """Longest dependency chain through consecutive steps, seconds.

    Training is serial; step ``s``'s rollout needs the weights of step ``s - staleness - 1``
    (synced). With ``staleness`` 0 this is the sum of the steps' critical paths."""
    synced: list[float] = []  # synced[s]: when step s's new weights reach the rollout workers
    trained = 0.0
    for s, step in enumerate(steps):
        rollout_start = synced[s - staleness - 1] if s - staleness - 1 >= 0 else 0.0
        trained = max(trained, rollout_start + step.rollout_path_s) + step.update_path_s
        synced.append(trained + step.sync_s)
    return synced[-1] if synced else 0.0


def lower_bound(
    cost: RooflineCostModel,
    pipelines: Sequence[tuple[PipelineSpec, Sequence[Sequence[SequenceShape]]]],
    num_devices: int,
) -> LowerBound:
    """``T_LB(num_devices)`` for ``pipelines``: each a spec and the plans of each sampled step.

    ``S_p`` is the number of step plans given, so each pipeline contributes exactly the work of
    the steps it actually sampled."""
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    ideal = replace(cost, device=roofline_device(cost.device))
    bounds: list[PipelineBound] = []
    for spec, step_plans in pipelines:
        practical = [pipeline_work(cost, spec, plans) for plans in step_plans]
        roofline = [pipeline_work(ideal, spec, plans) for plans in step_plans]
        bounds.append(
            PipelineBound(
                name=spec.name,
                num_steps=len(step_plans),
                work_gpu_s=sum(w.total_gpu_s for w in practical),
                critical_path_s=chain_s(practical, spec.staleness),
                roofline_work_gpu_s=sum(w.total_gpu_s for w in roofline),
                roofline_critical_path_s=chain_s(roofline, spec.staleness),
                steps=tuple(practical),
            )
        )
    return LowerBound(
        num_devices=num_devices,
        practical_s=max(
            sum(b.work_gpu_s for b in bounds) / num_devices,
            max((b.critical_path_s for b in bounds), default=0.0),
        ),
        roofline_s=max(
            sum(b.roofline_work_gpu_s for b in bounds) / num_devices,
            max((b.roofline_critical_path_s for b in bounds), default=0.0),
        ),
        pipelines=tuple(bounds),
    )


def _context_token_sum(plan: SequenceShape) -> float:
    """Sum over the sequence's generated tokens of the context resident when each is decoded
    (prompt, earlier turns, tool outputs): the KV bytes decode streams, in token units."""
    total = 0.0
    context = plan.prompt_tokens
    for turn, tokens in enumerate(plan.turn_tokens):
        if turn:
            context += plan.tool_output_tokens
        total += tokens * context + tokens * (tokens - 1) / 2.0
        context += tokens
    return total


def _alone_s(cost: RooflineCostModel, spec: PipelineSpec, plan: SequenceShape) -> float:
    """The sequence on an otherwise idle rollout worker: prefills, batch-1 decode, tool waits.

    Iteration cost is linear in context, so ``k`` iterations from context ``c`` cost exactly
    ``k * t(1, c + (k - 1) / 2)`` (as in ``workload.decode_sim``)."""
    model, tp = spec.model, spec.resources.tp
    total = cost.prefill_s(model, tokens=plan.prompt_tokens, tp=tp) + sum(plan.tool_waits_s)
    context = float(plan.prompt_tokens)
    for turn, tokens in enumerate(plan.turn_tokens):
        if turn:
            total += cost.prefill_s(model, tokens=plan.tool_output_tokens, tp=tp)
            context += plan.tool_output_tokens
        if tokens:
            mean_context = context + (tokens - 1) / 2.0
            total += tokens * cost.decode_iteration_s(model, batch=1, context_tokens=mean_context, tp=tp)
        context += tokens
    return total
