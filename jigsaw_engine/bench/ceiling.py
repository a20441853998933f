"""The ceiling of a synchronous mix: the larger of two makespans no schedule is expected to beat.

- the practical lower bound (:func:`~jigsaw_engine.cost.lower_bound.lower_bound`: the mix's
  work spread perfectly over the cluster, or a pipeline's critical path, whichever is longer);
- the mix's longest pipeline run alone on the whole cluster: a synchronous pipeline cannot
  finish sooner when it shares the cluster than when it has all of it. Each pipeline is
  simulated alone, asking for every device, under ``jigsaw`` and ``verl``; the faster counts.

The second term is measured, not proven: it is the best of two policies run alone, and a
schedule of the lone pipeline neither of them finds could be shorter. So a share of the ceiling
(ceiling / a policy's makespan) above 1 is possible in principle, and reports say "measured".
"""

from __future__ import annotations

import copy
from typing import Any

from jigsaw_engine.bench.simulate import simulate_workload
from jigsaw_engine.spec.workload_file import parse_workload


def is_sync_mix(doc: dict[str, Any]) -> bool:
    """Whether every pipeline of the mix document is synchronous (the lone-pipeline term's premise)."""
    return all(p.get("mode", "sync") == "sync" for p in doc["pipelines"])


def longest_alone_s(doc: dict[str, Any], *, steps: int, seed: int) -> tuple[float, str]:
    """The longest of the mix's pipelines, each alone on every device of the cluster: its
    makespan (the faster of ``jigsaw`` and ``verl``) and its name."""
    devices = doc["cluster"]["num_nodes"] * doc["cluster"]["devices_per_node"]
    times = []
    for pipeline in doc["pipelines"]:
        alone = copy.deepcopy(pipeline)
        alone["resources"]["num_gpus"] = devices
        report = simulate_workload(
            parse_workload({"cluster": doc["cluster"], "pipelines": [alone]}),
            ["jigsaw", "verl"],
            steps=steps,
            seed=seed,
            timing=False,
        )
        times.append((min(r["makespan_s"] for r in report["policies"].values()), pipeline["name"]))
    return max(times)


def ceiling_s(doc: dict[str, Any], practical_lb_s: float, *, steps: int, seed: int) -> float:
    """``max(practical lower bound, longest pipeline alone)`` for a synchronous mix, seconds."""
    if not is_sync_mix(doc):
        raise ValueError("the ceiling's lone-pipeline term holds for synchronous mixes only")
    return max(practical_lb_s, longest_alone_s(doc, steps=steps, seed=seed)[0])
