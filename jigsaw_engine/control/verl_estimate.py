"""How long verl would have taken for the steps the cluster finished: the cluster page's
"throughput against verl (estimated)".

Each finished step is re-costed with the same sampled sequences and the same cost model as it
ran with, but laid out as verl runs it: synchronous, rollout and training colocated, round-robin
dispatch, on a dedicated partition of the pipeline's own ``num_gpus`` devices (verl's usual
deployment) and, alone, on the whole cluster (its "serial" deployment). With every device to
itself a verl step takes its graph's critical path: workers generate side by side on their own
devices, then log-probs, training and the weight sync run one after another.

The steps of a window are split into busy periods (maximal runs of overlapping steps). Within
a period verl's time is bounded from below, in its favour:

    dedicated = max(sum_k gpus_k * t_k / N, max_p sum_{k of p} t_k)
    serial    = sum_k t'_k
    verl      = min(dedicated, serial)

(partitions packed perfectly, every job there from the period's start, the better deployment).
The ratio verl / actual is therefore a lower estimate of the throughput gained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.graph.builder import GraphConfig, build_step_graph
from jigsaw_engine.spec.cluster import ClusterSpec
from jigsaw_engine.spec.pipeline import PipelineSpec, ResourceSpec, SyncMode
from jigsaw_engine.workload.plans import SequencePlan

VERL_GRAPH = GraphConfig()
"""verl's step: round-robin dispatch, no overlapping or interrupted rollouts, no migration."""


@dataclass(frozen=True, slots=True)
class FinishedStep:
    """One step as it ran on the cluster, and as verl would have run it."""

    pipeline_id: str
    step: int
    """1-based, as the timeline's spans."""
    start_s: float
    end_s: float
    tokens: int
    flops: float
    """Training-equivalent FLOPs, 6 x parameters x tokens (what ``perf/mfu`` counts)."""
    verl_gpus: int
    verl_dedicated_s: float
    """The step alone, verl-style, on ``verl_gpus`` devices of its own; NaN when not estimated."""
    verl_serial_s: float
    """The step alone, verl-style, on the whole cluster; NaN when not estimated."""

    def as_dict(self) -> dict[str, Any]:
        """What the timeline shows of it (verl's times only enter the window's comparison)."""
        return {
            "pipeline_id": self.pipeline_id,
            "step": self.step,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "tokens": self.tokens,
            "flops": self.flops,
        }


def verl_step_times(
    cost: RooflineCostModel, cluster: ClusterSpec, spec: PipelineSpec, plans: list[SequencePlan], step: int
) -> tuple[float, float]:
    """(dedicated, serial) seconds of one step with these sampled sequences, run verl-style."""
    tp = spec.resources.tp
    sync = replace(spec, mode=SyncMode.SYNC, staleness=0)
    own = replace(sync, resources=ResourceSpec(num_gpus=spec.resources.num_gpus, tp=tp))
    whole = replace(sync, resources=ResourceSpec(num_gpus=cluster.num_devices // tp * tp, tp=tp))

    def alone_s(layout: PipelineSpec) -> float:
        graph = build_step_graph(cost, layout, plans, pipeline_id="verl", step=step, config=VERL_GRAPH)
        return graph.critical_path_s()

    return alone_s(own), alone_s(whole)


def _busy_periods(steps: Sequence[FinishedStep]) -> list[list[FinishedStep]]:
    periods: list[list[FinishedStep]] = []
    end = float("-inf")
    for s in sorted(steps, key=lambda s: s.start_s):
        if s.start_s > end:
            periods.append([])
        periods[-1].append(s)
        end = max(end, s.end_s)
    return periods


def verl_comparison(steps: Sequence[FinishedStep], num_devices: int) -> dict[str, Any]:
    """The window's readout: actual and estimated verl seconds for the same finished steps and
    their ratio (``speedup``: > 1 means the cluster did the work faster than verl would)."""
    estimated = [s for s in steps if s.verl_dedicated_s == s.verl_dedicated_s]  # NaN: not estimated
    out: dict[str, Any] = {
        "speedup": None,
        "actual_s": 0.0,
        "verl_s": 0.0,
        "verl_dedicated_s": 0.0,
        "verl_serial_s": 0.0,
        "steps": len(estimated),
        "tokens": sum(s.tokens for s in estimated),
        "note": None,
    }
    if len(estimated) < len(steps):
        out["note"] = "no verl estimate: real runs are measured, not modelled"
        return out
    if not estimated:
        out["note"] = "no step finished in this window"
        return out
    for period in _busy_periods(estimated):
        per_pipeline: dict[str, float] = {}
        for s in period:
            per_pipeline[s.pipeline_id] = per_pipeline.get(s.pipeline_id, 0.0) + s.verl_dedicated_s
        packed = sum(s.verl_gpus * s.verl_dedicated_s for s in period) / num_devices
        dedicated = max(packed, max(per_pipeline.values()))
        serial = sum(s.verl_serial_s for s in period)
        out["actual_s"] += max(s.end_s for s in period) - min(s.start_s for s in period)
        out["verl_dedicated_s"] += dedicated
        out["verl_serial_s"] += serial
        out["verl_s"] += min(dedicated, serial)
    if out["actual_s"] > 0:
        out["speedup"] = out["verl_s"] / out["actual_s"]
    return out
