"""Measure the CPU profile's engine constants with the project's own torch engine and trainer.

    .venv/bin/python scripts/measure_cpu_engine_profile.py [--write] [--out PATH]

``scripts/measure_cpu_profile.py`` measures the host with numpy at the shapes of a 0.6B model
(GEMM peak, memory bandwidth). The pipelines that really run here are the tiny presets, whose
128-256 wide matrices reach a small fraction of that peak and whose decode iterations are all
fixed cost: forecast with the numpy constants, a tiny pipeline's rollout came out 2-8x too long
and its training 2-10x too short. This script measures what those runs do, on one pinned core
with one torch thread (a device of a CPU cluster is a core, see ``examples/real-cpu.yaml``):

- t_fix_s, c_seq_s: intercept and slope over the running batch (1-256) of a decode iteration
  of :class:`TorchRolloutEngine` (KV cache, per-sequence seeded sampling), prompts of 32 tokens;
- eta_prefill: 2 FLOPs per parameter per prompt token over the time of the engine's prefill
  iteration (prompts of 32-96 tokens, 8-128 at once), against ``peak_flops_bf16``;
- mfu_forward, mfu_train: the time of :func:`batch_log_probs` and of a :class:`PolicyTrainer`
  update (micro-batches of 128, AdamW, clipping) on batches of 64-256 sequences of 40-200 tokens,
  as the cost model charges them (``FRAMEWORK_FACTOR`` x 2 or 6 FLOPs per parameter per token);
- reward_s_per_sequence: the real graders (exact-match math answers) per completion.

Each constant is fitted on both presets' points (1M and 6M parameters, counted as the
simulator's model catalogue counts them) and printed with the fit's worst relative error.
``--write`` stores them into ``jigsaw_engine/cost/profiles/cpu.json``; the host constants of
the numpy script stay as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from jigsaw_engine.cost.cost_model import FRAMEWORK_FACTOR
from jigsaw_engine.envs.graders import grade_numeric
from jigsaw_engine.models.loading import build_tiny_model
from jigsaw_engine.models.presets import tiny_preset
from jigsaw_engine.models.tokenizer_build import build_tokenizer
from jigsaw_engine.rollout.protocol import RolloutRequest, SamplingParams
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
from jigsaw_engine.spec.models import MODEL_CATALOGUE
from jigsaw_engine.train.policy_trainer import ActorConfig, PolicyTrainer
from jigsaw_engine.train.token_batch import Sample, TokenBatch, batch_log_probs, collate

OUT = Path(__file__).resolve().parents[1] / "jigsaw_engine" / "cost" / "profiles" / "cpu.json"
PRESETS = ("tiny-qwen2-1m", "tiny-qwen2-6m")
DECODE_BATCHES = (1, 8, 32, 64, 128, 256)
DECODE_TOKENS = 16  # iterations per batch after the prefill one
PREFILL_CASES = ((8, 32), (32, 64), (128, 32), (64, 96))  # (sequences, prompt tokens)
TRAIN_CASES = ((64, 40), (256, 40), (128, 120), (64, 200))  # (sequences, tokens each)
MICRO_BATCH = 128  # as real tiny jobs train (runtime/real_jobs.py)


def best_of(fn: Callable[[], float], repeats: int = 3) -> float:
    """Least disturbed of ``repeats`` timings (each ``fn`` returns its own seconds)."""
    return min(fn() for _ in range(repeats))


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def fit_scale(xs: list[float], ys: list[float]) -> float:
    """Least-squares ``k`` of ``y = k x`` in relative terms (each point weighs the same)."""
    return statistics.fmean(y / x for x, y in zip(xs, ys, strict=True))


def worst_error(predicted: list[float], measured: list[float]) -> float:
    return max(abs(p / m - 1.0) for p, m in zip(predicted, measured, strict=True))


class Subject:
    """One preset: a random-weight model (speed does not depend on the weights) and its tokens."""

    def __init__(self, preset: str, vocab: list[str]) -> None:
        self.name = preset
        self.tokenizer = build_tokenizer(vocab, vocab_size=512)
        self.model = build_tiny_model(tiny_preset(preset), self.tokenizer, seed=0)
        self.params = MODEL_CATALOGUE[preset].num_params  # the simulator's count
        self.vocab = len(self.tokenizer)
        self.rng = random.Random(0)

    def ids(self, n: int) -> tuple[int, ...]:
        return tuple(self.rng.randrange(3, self.vocab) for _ in range(n))

    def decode_iterations(self, batch: int) -> float:
        """Mean seconds of a decode iteration with ``batch`` sequences running."""
        engine = TorchRolloutEngine(self.model, pad_token_id=self.tokenizer.pad_token_id, max_num_seqs=256)
        sampling = SamplingParams(max_tokens=DECODE_TOKENS + 1, temperature=1.0, seed=1)
        for i in range(batch):
            engine.add_request(RolloutRequest(f"r{i}", self.ids(32), sampling))
        engine.step()  # prefill
        t0 = time.perf_counter()
        for _ in range(DECODE_TOKENS):
            engine.step()
        return (time.perf_counter() - t0) / DECODE_TOKENS

    def prefill(self, sequences: int, prompt: int) -> float:
        engine = TorchRolloutEngine(self.model, pad_token_id=self.tokenizer.pad_token_id, max_num_seqs=256)
        sampling = SamplingParams(max_tokens=1, temperature=1.0, seed=1)
        for i in range(sequences):
            engine.add_request(RolloutRequest(f"r{i}", self.ids(prompt), sampling))
        t0 = time.perf_counter()
        engine.step()
        return time.perf_counter() - t0

    def batch(self, sequences: int, tokens: int) -> tuple[TokenBatch, int]:
        # Lengths spread +-25% as real replies are, so micro-batches pad as they do in a run.
        samples = []
        for _ in range(sequences):
            n = max(4, round(tokens * self.rng.uniform(0.75, 1.25)))
            written = tuple(i >= n // 2 for i in range(n))
            samples.append(Sample(self.ids(n), written))
        return collate(samples, pad_token_id=self.tokenizer.pad_token_id), sum(len(s.token_ids) for s in samples)

    def forward(self, sequences: int, tokens: int) -> tuple[float, int]:
        batch, total = self.batch(sequences, tokens)

        def once() -> float:
            t0 = time.perf_counter()
            batch_log_probs(self.model, batch, micro_batch_size=MICRO_BATCH)
            return time.perf_counter() - t0

        return best_of(once), total

    def train(self, sequences: int, tokens: int) -> tuple[float, int]:
        batch, total = self.batch(sequences, tokens)
        trainer = PolicyTrainer(self.model, ActorConfig(lr=1e-4, micro_batch_size=MICRO_BATCH))
        old = batch_log_probs(self.model, batch, micro_batch_size=MICRO_BATCH)
        advantages = torch.randn(batch.response_mask.shape)

        def once() -> float:
            t0 = time.perf_counter()
            trainer.update(batch, advantages, old)
            return time.perf_counter() - t0

        return best_of(once, 2), total


def reward_s_per_sequence() -> float:
    """The exact-match numeric grader on replies like the math task's."""
    replies = [f"The sum is {a}. #### {a}" for a in range(2000)]
    t0 = time.perf_counter()
    for i, reply in enumerate(replies):
        grade_numeric(reply, str(i % 7))
    return (time.perf_counter() - t0) / len(replies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the constants into the CPU profile")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    torch.set_num_threads(1)
    profile = json.loads(args.out.read_text())
    peak = profile["peak_flops_bf16"]
    vocab = [f"Compute {a}+{b}. The sum is {a + b}. #### {a + b}" for a in range(40) for b in range(40)]
    subjects = [Subject(name, vocab) for name in PRESETS]

    decode_x, decode_y = [], []
    for s in subjects:
        s.decode_iterations(8)  # warm-up
        for b in DECODE_BATCHES:
            t = best_of(lambda s=s, b=b: s.decode_iterations(b))
            decode_x.append(b)
            decode_y.append(t)
            print(f"decode   {s.name:14s} batch {b:4d}: {t * 1e3:7.2f} ms/iteration")
    t_fix, c_seq = fit_line(decode_x, decode_y)
    decode_err = worst_error([t_fix + c_seq * b for b in decode_x], decode_y)

    def efficiency(points: list[tuple[float, float]]) -> float:
        """Fraction of peak the points reach: (FLOPs, seconds) pairs."""
        return fit_scale([f / peak for f, _ in points], [t for _, t in points]) ** -1

    prefill_points = []
    for s in subjects:
        for n, prompt in PREFILL_CASES:
            t = best_of(lambda s=s, n=n, p=prompt: s.prefill(n, p))
            prefill_points.append((2.0 * s.params * n * prompt, t))
            print(f"prefill  {s.name:14s} {n:4d} x {prompt:3d} tokens: {t * 1e3:7.1f} ms")
    eta_prefill = efficiency(prefill_points)

    forward_points, train_points = [], []
    for s in subjects:
        for n, tokens in TRAIN_CASES:
            t, total = s.forward(n, tokens)
            forward_points.append((FRAMEWORK_FACTOR * 2.0 * s.params * total, t))
            t_train, total = s.train(n, tokens)
            train_points.append((FRAMEWORK_FACTOR * 6.0 * s.params * total, t_train))
            print(f"forward  {s.name:14s} {n:4d} x ~{tokens:3d} tokens: {t:6.3f} s   train {t_train:6.3f} s")
    mfu_forward, mfu_train = efficiency(forward_points), efficiency(train_points)
    reward_s = reward_s_per_sequence()

    def err(points: list[tuple[float, float]], eff: float) -> float:
        return worst_error([f / (eff * peak) for f, _ in points], [t for _, t in points])

    fitted = {
        "t_fix_s": round(t_fix, 6),
        "c_seq_s": round(c_seq, 7),
        "eta_prefill": round(eta_prefill, 4),
        "mfu_forward": round(mfu_forward, 4),
        "mfu_train": round(mfu_train, 4),
        "reward_s_per_sequence": round(reward_s, 7),
    }
    print(f"\nfitted on {', '.join(PRESETS)} (one core, one torch thread); worst relative error of each fit:")
    print(f"  t_fix_s {t_fix * 1e3:.3f} ms, c_seq_s {c_seq * 1e6:.1f} us/sequence   (decode, {decode_err:.0%})")
    print(f"  eta_prefill {eta_prefill:.4f}   ({err(prefill_points, eta_prefill):.0%})")
    print(f"  mfu_forward {mfu_forward:.4f}   ({err(forward_points, mfu_forward):.0%})")
    print(f"  mfu_train   {mfu_train:.4f}   ({err(train_points, mfu_train):.0%})")
    print(f"  reward_s_per_sequence {reward_s * 1e6:.1f} us")
    if args.write:
        profile.update(fitted)
        args.out.write_text(json.dumps(profile, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
