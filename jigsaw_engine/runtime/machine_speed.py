"""How fast this machine runs tiny-model work right now, against when its profile was measured.

A shared CPU host's speed moves by 10-100% from hour to hour (other tenants' load, turbo), up to
2x for the same fixed torch work (``docs/real-runs.md``, "The host's speed"). A forecast made
with a profile measured at another moment is off by that much before the cost model is wrong
at all. So the CPU profile records the time of one fixed piece of work
(:func:`reference_seconds`: decode iterations of the torch rollout engine and an AdamW update
of a tiny model, on one pinned core) as ``reference_s``, and a real run times the same work
beside itself: their ratio is the machine's slowdown, by which the forecast's profile is
scaled (:func:`jigsaw_engine.cost.device.slowed_down`). Both errors are reported, scaled and not.
"""

from __future__ import annotations

import os
import statistics
import time

REFERENCE_REPEATS = 5


def reference_seconds(repeats: int = REFERENCE_REPEATS) -> float:
    """Median seconds of the reference work (about 0.1 s each) on one core of this process's,
    with one torch thread; the caller's affinity and thread count are restored."""
    import torch

    pinned = hasattr(os, "sched_setaffinity")
    affinity = os.sched_getaffinity(0) if pinned else set()
    threads = torch.get_num_threads()
    if pinned:
        os.sched_setaffinity(0, {min(affinity)})
    torch.set_num_threads(1)
    try:
        work = _ReferenceWork()
        work.run()  # warm-up: allocator, first-call dispatch
        return statistics.median(work.run() for _ in range(repeats))
    finally:
        if pinned:
            os.sched_setaffinity(0, affinity)
        torch.set_num_threads(threads)


class _ReferenceWork:
    """Fixed, seeded work of the shapes tiny real jobs run: 12 decode iterations of 32
    sequences after 24-token prompts, then a forward, backward and AdamW step over 64 rows of
    40 tokens, on tiny-qwen2-1m's architecture with random weights."""

    def __init__(self) -> None:
        import torch

        from jigsaw_engine.models.loading import build_tiny_model
        from jigsaw_engine.models.presets import tiny_preset
        from jigsaw_engine.models.tokenizer_build import build_tokenizer

        tokenizer = build_tokenizer([f"Compute {a}+{b}. #### {a + b}" for a in range(30) for b in range(30)])
        self.model = build_tiny_model(tiny_preset("tiny-qwen2-1m"), tokenizer, seed=0)
        self.pad = tokenizer.pad_token_id
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        generator = torch.Generator().manual_seed(0)
        vocab = len(tokenizer)
        self.prompts = torch.randint(3, vocab, (32, 24), generator=generator).tolist()
        self.rows = torch.randint(3, vocab, (64, 40), generator=generator)

    def run(self) -> float:
        from jigsaw_engine.rollout.protocol import RolloutRequest, SamplingParams
        from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine

        started = time.perf_counter()
        engine = TorchRolloutEngine(self.model, pad_token_id=self.pad)
        sampling = SamplingParams(max_tokens=13, temperature=1.0, seed=1)
        for i, prompt in enumerate(self.prompts):
            engine.add_request(RolloutRequest(f"r{i}", tuple(prompt), sampling))
        for _ in range(13):  # the prefill, then 12 decode iterations
            engine.step()
        self.model.train()
        loss = self.model(input_ids=self.rows, labels=self.rows).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - started


def slowdown_range(before_s: float, after_s: float, reference_s: float | None) -> list[float]:
    """The machine's slowdown against its profile from the reference work timed before and
    after a run, the lower first; [1, 1] for a profile with no reference. Their mean is what
    a forecast is scaled by, their spread how steady the machine was meanwhile."""
    if not reference_s:
        return [1.0, 1.0]
    return sorted((before_s / reference_s, after_s / reference_s))
