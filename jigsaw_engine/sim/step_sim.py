"""One RL step of one pipeline on its own devices (verl-style: rollout, then train).

The step's sub-stage graph executed stage by stage: every rollout worker runs its chain, the
slowest one ends the generation stage, then reward, log-probs, update and weight sync follow
in order. It returns the stage durations; the controller reports the same step's verl-named
metrics from what actually ran (``control/step_metrics.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.graph.builder import build_step_graph
from jigsaw_engine.graph.substage import SubStageKind
from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.workload.lengths import sample_step


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
    )
