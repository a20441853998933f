"""One RL step of one pipeline on its own devices (verl-style: rollout, then train).

This is the stage-level execution every policy starts from; the sub-stage graph and the
multiplexing scheduler refine it. It returns the sub-stage durations and verl-named metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw_engine.cost.cost_model import STAGE_OVERHEAD_S, RooflineCostModel
from jigsaw_engine.sim.decode_sim import simulate_worker
from jigsaw_engine.sim.lengths import SequencePlan, sample_step
from jigsaw_engine.spec.pipeline import Algorithm, PipelineSpec


@dataclass(frozen=True, slots=True)
class StepResult:
    step: int
    duration_s: float
    gen_s: float
    reward_s: float
    old_logprob_s: float
    ref_logprob_s: float
    update_s: float
    sync_s: float
    tail_s: float
    trained_tokens: int
    response_tokens: list[int]
    response_cap: int
    num_gpus: int
    model_params: float
    peak_flops: float

    def metrics(self) -> dict[str, float]:
        """verl's metric names where one exists (``perf/throughput`` is tokens/s per GPU)."""
        lengths = self.response_tokens
        clipped = sum(1 for n in lengths if n >= self.response_cap)
        mfu = 6.0 * self.model_params * self.trained_tokens / (self.num_gpus * self.peak_flops * self.duration_s)
        return {
            "timing_s/step": self.duration_s,
            "timing_s/gen": self.gen_s,
            "timing_s/reward": self.reward_s,
            "timing_s/old_log_prob": self.old_logprob_s,
            "timing_s/ref": self.ref_logprob_s,
            "timing_s/update_actor": self.update_s,
            "timing_s/sync": self.sync_s,
            "timing_s/gen_tail": self.tail_s,
            "response_length/mean": sum(lengths) / len(lengths),
            "response_length/max": float(max(lengths)),
            "response_length/clip_ratio": clipped / len(lengths),
            "perf/total_num_tokens": float(self.trained_tokens),
            "perf/throughput": self.trained_tokens / (self.duration_s * self.num_gpus),
            "perf/mfu": mfu,
        }


REWARD_S_PER_SEQUENCE = 0.002
"""Rule-based graders run on CPU workers in parallel: about 2 ms per sequence of wall time."""


def simulate_step(cost: RooflineCostModel, spec: PipelineSpec, step: int) -> StepResult:
    plans = sample_step(spec, step)
    dp = spec.resources.dp
    tp = spec.resources.tp
    # Round-robin by group, as verl's dispatch does: each worker gets whole prompts' groups.
    per_worker: list[list[SequencePlan]] = [[] for _ in range(dp)]
    n = spec.rollout.n
    for g in range(spec.train_batch_size):
        per_worker[g % dp].extend(plans[g * n : (g + 1) * n])
    workers = [simulate_worker(cost, spec.model, ws, tp=tp) for ws in per_worker if ws]
    gen_s = max(w.duration_s for w in workers) + STAGE_OVERHEAD_S
    tail_s = max(w.tail_s for w in workers)

    tokens = sum(p.total_tokens for p in plans)
    gpus = spec.resources.num_gpus
    reward_s = REWARD_S_PER_SEQUENCE * len(plans) + STAGE_OVERHEAD_S
    old_s = cost.logprob_forward_s(spec.model, tokens=tokens, num_gpus=gpus) + STAGE_OVERHEAD_S
    uses_reference = spec.algorithm in (Algorithm.GRPO, Algorithm.PPO)
    ref_s = old_s if uses_reference else 0.0
    update_s = cost.train_s(spec.model, tokens=tokens, num_gpus=gpus, epochs=spec.ppo_epochs)
    if spec.algorithm is Algorithm.PPO:
        # The critic (same size as the actor here) adds a values forward and its own update.
        update_s += old_s + cost.train_s(spec.model, tokens=tokens, num_gpus=gpus, epochs=spec.ppo_epochs)
    update_s += STAGE_OVERHEAD_S
    sync_s = cost.weight_sync_s(spec.model)
    duration = gen_s + reward_s + old_s + ref_s + update_s + sync_s
    return StepResult(
        step=step,
        duration_s=duration,
        gen_s=gen_s,
        reward_s=reward_s,
        old_logprob_s=old_s,
        ref_logprob_s=ref_s,
        update_s=update_s,
        sync_s=sync_s,
        tail_s=tail_s,
        trained_tokens=tokens,
        response_tokens=[p.response_tokens for p in plans],
        response_cap=spec.rollout.max_response_length,
        num_gpus=gpus,
        model_params=spec.model.num_params,
        peak_flops=cost.device.peak_flops_bf16,
    )
