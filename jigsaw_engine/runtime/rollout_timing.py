"""Timing a rollout engine's decode iterations, prefills and weight loads through the engine
protocol alone, for the CPU profile's per-engine constants (``scripts/measure_cpu_engine_profile.py
--engine vllm``; the torch engine's own points are taken by that script's ``Subject``).

A paged engine (vLLM) schedules a large batch's prompts over several steps (chunked prefill),
so a decode point starts timing only once every request has produced a token, and reports the
KV tokens its timed iterations held: the rows' own contexts, not rows x the longest.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Mapping, Sequence

import torch

from jigsaw_engine.rollout.protocol import RolloutEngine, RolloutRequest, SamplingParams

PAGED_DECODE_CASES = (
    tuple((b, 32) for b in (1, 8, 32, 64, 128, 256)) + tuple((b, 120) for b in (1, 8, 32, 128)) + ((128, 24), (256, 24))
)
"""(sequences, prompt tokens) of a paged engine's decode points: as the torch engine's
(:data:`~jigsaw_engine.runtime.profile_fit.DECODE_CASES`), fewer, the long contexts at 120
tokens so that a prompt spread to 1.5x and its reply fit the presets' 256 positions, and the
example checkpoint jobs' own shapes (128 and 256 replies to prompts of about 24 tokens)."""
PAGED_PREFILL_CASES = ((1, 8), (4, 24), (32, 64), (128, 24), (256, 24), (64, 96), (32, 160))
"""(sequences, prompt tokens) of its prefill points: the torch engine's, fewer and at most 160
tokens (the presets' positions), with the checkpoint jobs' 128 and 256 prompts."""
_ids = itertools.count()


def decode_iteration_s(
    engine: RolloutEngine, prompts: Sequence[tuple[int, ...]], iterations: int, *, max_model_len: int
) -> tuple[float, float]:
    """(mean seconds of a decode iteration, mean KV tokens the iterations held) with one
    sampled request per prompt running, timed from the first step in which all of them
    decode; the requests are aborted after. They may write up to ``max_model_len``: the ones
    started first in a chunked prefill decode meanwhile, for as many steps as it takes."""
    longest = max(len(p) for p in prompts)
    if longest + iterations >= max_model_len:
        raise ValueError(f"prompts of up to {longest} tokens leave no {iterations} iterations in {max_model_len}")
    sampling = SamplingParams(max_tokens=max_model_len - longest - 1, temperature=1.0, seed=1)
    ids = [f"d{next(_ids)}" for _ in prompts]
    for request_id, prompt in zip(ids, prompts, strict=True):
        engine.add_request(RolloutRequest(request_id, prompt, sampling))
    generated = 0
    while True:  # prefill, in as many steps as the engine cuts it into
        engine.step()
        stats = engine.last_iteration()
        generated += stats.decode_tokens
        if stats.running == len(prompts):
            break
    started = time.perf_counter()
    for _ in range(iterations):
        engine.step()
        if engine.last_iteration().running != len(prompts):
            raise RuntimeError(f"a request ended within the timed iterations ({engine.last_iteration()})")
    seconds = (time.perf_counter() - started) / iterations
    for request_id in ids:
        engine.abort_request(request_id)
    context = sum(len(p) for p in prompts) + generated + len(prompts) * iterations / 2
    return seconds, context


def prefill_s(engine: RolloutEngine, prompts: Sequence[tuple[int, ...]]) -> float:
    """Seconds from adding one sampled request per prompt (one token each) to all finished:
    the prefill, however many steps the engine takes, and the first token's draw."""
    sampling = SamplingParams(max_tokens=1, temperature=1.0, seed=1)
    started = time.perf_counter()
    for prompt in prompts:
        engine.add_request(RolloutRequest(f"p{next(_ids)}", prompt, sampling))
    while engine.has_unfinished():
        engine.step()
    return time.perf_counter() - started


def weight_load_s(engine: RolloutEngine, weights: Mapping[str, torch.Tensor], repeats: int = 5) -> float:
    """Median seconds of :meth:`RolloutEngine.load_weights` of ``weights`` (an idle engine)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        engine.load_weights(weights)
        times.append(time.perf_counter() - started)
    return statistics.median(times)
