"""One RL step of one pipeline on its own devices (verl-style: rollout, then train).

The step's sub-stage graph executed stage by stage: every rollout worker runs its chain, the
slowest one ends the generation stage, then reward, log-probs, update and weight sync follow
in order. It returns the stage durations and verl-named metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.graph.builder import build_step_graph
from jigsaw_engine.graph.substage import SubStageKind
from jigsaw_engine.sim.lengths import sample_step
from jigsaw_engine.spec.pipeline import PipelineSpec


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


def simulate_step(cost: RooflineCostModel, spec: PipelineSpec, step: int) -> StepResult:
    """The step's sub-stage graph executed stage by stage on the pipeline's own devices."""
    plans = sample_step(spec, step)
    graph = build_step_graph(cost, spec, plans, pipeline_id=spec.name, step=step)

    def total(kind: SubStageKind) -> float:
        return sum(n.duration_s for n in graph.of_kind(kind))

    per_worker: dict[int, float] = {}
    tails: dict[int, float] = {}
    for n in graph.nodes:
        if n.worker is not None:
            per_worker[n.worker] = per_worker.get(n.worker, 0.0) + n.duration_s
            if n.bucket == "tail":
                tails[n.worker] = n.duration_s
    gen_s = max(per_worker.values())
    reward_s, old_s, ref_s = (
        total(SubStageKind.REWARD),
        total(SubStageKind.OLD_LOGPROB),
        total(SubStageKind.REF_LOGPROB),
    )
    update_s, sync_s = total(SubStageKind.TRAIN), total(SubStageKind.WEIGHT_SYNC)
    return StepResult(
        step=step,
        duration_s=gen_s + reward_s + old_s + ref_s + update_s + sync_s,
        gen_s=gen_s,
        reward_s=reward_s,
        old_logprob_s=old_s,
        ref_logprob_s=ref_s,
        update_s=update_s,
        sync_s=sync_s,
        tail_s=max(tails.values(), default=0.0),
        trained_tokens=sum(p.total_tokens for p in plans),
        response_tokens=[p.response_tokens for p in plans],
        response_cap=spec.rollout.max_response_length,
        num_gpus=spec.resources.num_gpus,
        model_params=spec.model.num_params,
        peak_flops=cost.device.peak_flops_bf16,
    )
