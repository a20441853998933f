"""Seeded sampling of what a step's rollouts will look like: turns, lengths, tool waits."""

from __future__ import annotations

import math
import random
from functools import lru_cache

from jigsaw_engine.spec.pipeline import PipelineSpec
from jigsaw_engine.spec.workloads import WorkloadSpec
from jigsaw_engine.workload.plans import SequencePlan, step_rng
from jigsaw_engine.workload.traces import replay_step


def sample_step(spec: PipelineSpec, step: int) -> list[SequencePlan]:
    """The sequences of one step, grouped: ``rollout.n`` consecutive plans share a prompt."""
    if spec.workload.trace is not None:
        return replay_step(spec, step)
    return list(_sample(spec.seed, spec.workload, spec.train_batch_size, spec.rollout.n,
                        spec.rollout.max_response_length, step))  # fmt: skip


@lru_cache(maxsize=4096)
def _sample(seed: int, w: WorkloadSpec, batch: int, n: int, cap: int, step: int) -> tuple[SequencePlan, ...]:
    # Cached: every policy of a benchmark replays the same seeds, and searches replay them again.
    rng = step_rng(seed, step)
    rho = w.group_correlation
    plans: list[SequencePlan] = []
    for _ in range(batch):
        z_group = rng.gauss(0.0, 1.0)
        num_turns = _draw_turns(rng, w.turn_weights)
        for _ in range(n):
            turns: list[int] = []
            budget = cap
            for _ in range(num_turns):
                z = math.sqrt(rho) * z_group + math.sqrt(1.0 - rho) * rng.gauss(0.0, 1.0)
                tokens = max(1, int(w.response_median_tokens * math.exp(w.response_sigma * z)))
                tokens = min(tokens, budget)
                turns.append(tokens)
                budget -= tokens
                if budget <= 0:
                    break
            waits = tuple(
                w.tool_latency_median_s * math.exp(w.tool_latency_sigma * rng.gauss(0.0, 1.0))
                for _ in range(len(turns) - 1)
            )
            plans.append(SequencePlan(w.prompt_tokens, tuple(turns), waits, w.tool_output_tokens))
    return tuple(plans)


def _draw_turns(rng: random.Random, weights: tuple[float, ...]) -> int:
    u = rng.random() * sum(weights)
    acc = 0.0
    for i, weight in enumerate(weights):
        acc += weight
        if u < acc:
            return i + 1
    return len(weights)
