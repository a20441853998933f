"""Measure the CPU profile's engine constants with the project's own torch engine and trainer.

    .venv/bin/python scripts/measure_cpu_engine_profile.py [--write] [--out PATH] [--parallel-only]

``scripts/measure_cpu_profile.py`` measures the host with numpy at the shapes of a 0.6B model
(GEMM peak, memory bandwidth). The pipelines that really run here are the tiny presets, whose
128-256 wide matrices reach a small fraction of that peak and whose decode iterations are all
fixed cost: forecast with the numpy constants, a tiny pipeline's rollout came out 2-8x too long
and its training 2-10x too short. This script measures what those runs do, on one pinned core
with one torch thread (a device of a CPU cluster is a core, see ``examples/real-cpu.yaml``):

- eta_compute, t_fix_s, c_seq_s, eta_kv: the cost model's decode iteration (fixed cost,
  per-sequence cost, weights, KV reads and the GEMMs at eta_compute of peak) fitted to the time
  of a decode iteration of :class:`TorchRolloutEngine` (KV cache, per-sequence seeded sampling)
  over the running batch (1-256 after prompts of about 32 tokens, 1-128 after about 160),
  spread as a real batch's are and left-padded to the longest (see :func:`fit_decode`,
  :meth:`Subject.prompt_lengths`); each point's fitted error is printed;
- prefill_fix_s, eta_prefill: the engine's prefill iteration (prompts of about 8-192 tokens,
  spread the same way, 1-128 at once, computed at the longest's length) as a fixed cost plus
  2 FLOPs per parameter per prompt token, plus attention's, at eta_prefill of
  ``peak_flops_bf16`` (a turn rejoining after a tool call is often prefilled alone, where the
  fixed cost is most of it);
- mfu_forward and forward_elementwise_s, mfu_train and train_elementwise_s: the time of
  :func:`batch_log_probs` and of a :class:`PolicyTrainer` update (four optimizer steps and
  micro-batches as real tiny jobs cut them, AdamW, clipping) on batches of 32-256 sequences of
  12-200 tokens, as the cost model charges them: ``FRAMEWORK_FACTOR`` x 2 or 6 FLOPs per
  parameter per token plus attention's (:func:`forward_flops`, :func:`train_flops`) at the MFU,
  plus the work outside the matrix multiplies per token x layer x hidden size (see
  :func:`fit_flops_plus_extra`);
- parallel_fraction: the same forwards and updates on two cores (two torch threads, as a job's
  node placed on two cores runs) against one, as Amdahl's fraction ``2 (1 - t2 / t1)``: the
  median of every point, and each preset's median by its size (``parallel_fraction_by_params``:
  a narrow model divides less); kept as they are on a machine with one core. ``--parallel-only``
  measures these alone;
- reference_s: the time of :func:`reference_seconds` at the machine's median speed over the
  measurement; every point is timed between two runs of it and scaled to that one speed
  (:class:`AtOneSpeed`), and a real run times the same work to scale its forecast by how much
  slower or faster the machine is then;
- reward_s_per_sequence: a real grader (exact-match math answers) and the assembly of the
  training batch (:func:`collate`), per sequence: what a step's reward sub-stage does here.

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
from functools import partial
from pathlib import Path
from typing import Any

import torch

from jigsaw_engine.cost.cost_model import FRAMEWORK_FACTOR, RooflineCostModel, forward_flops, train_flops
from jigsaw_engine.cost.device import DeviceProfile
from jigsaw_engine.envs.graders import grade_numeric
from jigsaw_engine.models.loading import build_tiny_model
from jigsaw_engine.models.presets import tiny_preset
from jigsaw_engine.models.tokenizer_build import build_tokenizer
from jigsaw_engine.real.jobs import (
    OPTIMIZER_STEPS_PER_UPDATE,
    TINY_MICRO_BATCH_OVERHEAD_TOKENS,
    TINY_MICRO_BATCH_ROWS,
    TINY_MICRO_BATCH_TOKENS,
)
from jigsaw_engine.rollout.protocol import RolloutRequest, SamplingParams
from jigsaw_engine.rollout.torch_engine import TorchRolloutEngine
from jigsaw_engine.runtime.profile_fit import (
    DECODE_CASES,
    DECODE_TOKENS,
    PARALLEL_CASES,
    PREFILL_CASES,
    PRESETS,
    TRAIN_CASES,
    AtOneSpeed,
    DecodePoint,
    amdahl_fraction,
    decode_context,
    fit_decode,
    fit_flops_plus_extra,
    median_of,
)
from jigsaw_engine.spec.models import MODEL_CATALOGUE
from jigsaw_engine.train.policy_trainer import ActorConfig, PolicyTrainer
from jigsaw_engine.train.token_batch import Sample, TokenBatch, batch_log_probs, collate

OUT = Path(__file__).resolve().parents[1] / "jigsaw_engine" / "cost" / "profiles" / "cpu.json"


def on_cores(cores: set[int], fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """``fn`` run on ``cores`` with a torch thread each; back to one thread where it was after."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(len(cores))
    try:
        return fn()
    finally:
        os.sched_setaffinity(0, before)
        torch.set_num_threads(1)


class Subject:
    """One preset: a random-weight model (speed does not depend on the weights) and its tokens."""

    def __init__(self, preset: str, vocab: list[str]) -> None:
        self.name = preset
        self.tokenizer = build_tokenizer(vocab, vocab_size=512)
        self.model = build_tiny_model(tiny_preset(preset), self.tokenizer, seed=0)
        self.spec = MODEL_CATALOGUE[preset]  # the simulator's counts
        self.params = self.spec.num_params
        self.vocab = len(self.tokenizer)
        self.rng = random.Random(0)

    def ids(self, n: int) -> tuple[int, ...]:
        return tuple(self.rng.randrange(3, self.vocab) for _ in range(n))

    def prompt_lengths(self, count: int, tokens: int) -> list[int]:
        """``count`` prompt lengths spread over ``tokens`` / 2 .. 3 ``tokens`` / 2, as a real
        batch's prompts and conversations are: the engine left-pads them to the longest, and a
        padded batch decoded 1.3-1.5x slower than one of equal prompts at 128-256 sequences
        (HF's attention takes its masked path), which is what real rollouts pay."""
        return [self.rng.randint(max(1, tokens // 2), tokens * 3 // 2) for _ in range(count)]

    def decode_iterations(self, lengths: list[int]) -> float:
        """Mean seconds of a decode iteration with a sequence of each of ``lengths`` running."""
        engine = TorchRolloutEngine(self.model, pad_token_id=self.tokenizer.pad_token_id, max_num_seqs=256)
        sampling = SamplingParams(max_tokens=DECODE_TOKENS + 1, temperature=1.0, seed=1)
        for i, n in enumerate(lengths):
            engine.add_request(RolloutRequest(f"r{i}", self.ids(n), sampling))
        engine.step()  # prefill
        t0 = time.perf_counter()
        for _ in range(DECODE_TOKENS):
            engine.step()
        return (time.perf_counter() - t0) / DECODE_TOKENS

    def prefill(self, lengths: list[int]) -> float:
        engine = TorchRolloutEngine(self.model, pad_token_id=self.tokenizer.pad_token_id, max_num_seqs=256)
        sampling = SamplingParams(max_tokens=1, temperature=1.0, seed=1)
        for i, n in enumerate(lengths):
            engine.add_request(RolloutRequest(f"r{i}", self.ids(n), sampling))
        t0 = time.perf_counter()
        engine.step()
        return time.perf_counter() - t0

    def batch(self, sequences: int, tokens: int) -> tuple[TokenBatch, int, int]:
        """A batch of about ``tokens`` per sequence; its tokens, and its lengths squared summed."""
        # Lengths spread +-25% as real replies are, so micro-batches pad as they do in a run.
        samples = []
        for _ in range(sequences):
            n = max(4, round(tokens * self.rng.uniform(0.75, 1.25)))
            written = tuple(i >= n // 2 for i in range(n))
            samples.append(Sample(self.ids(n), written))
        lengths = [len(s.token_ids) for s in samples]
        batch = collate(samples, pad_token_id=self.tokenizer.pad_token_id)
        return batch, sum(lengths), sum(n * n for n in lengths)

    def forward(self, sequences: int, tokens: int) -> tuple[float, float]:
        """Median seconds of the log-prob forward over fresh batches; the FLOPs the cost model
        charges the last one."""
        flops = 0.0

        def once() -> float:
            nonlocal flops
            batch, total, square = self.batch(sequences, tokens)
            flops = forward_flops(self.spec, tokens=total, square_tokens=square)
            t0 = time.perf_counter()
            batch_log_probs(
                self.model,
                batch,
                micro_batch_size=TINY_MICRO_BATCH_ROWS,
                micro_batch_tokens=TINY_MICRO_BATCH_TOKENS,
                micro_batch_overhead_tokens=TINY_MICRO_BATCH_OVERHEAD_TOKENS,
            )
            return time.perf_counter() - t0

        return median_of(once), flops

    def train(self, sequences: int, tokens: int) -> tuple[float, float]:
        """Median seconds of a trainer update over fresh batches; the FLOPs the cost model
        charges the last one."""
        config = ActorConfig(
            lr=1e-4,
            micro_batch_size=TINY_MICRO_BATCH_ROWS,
            micro_batch_tokens=TINY_MICRO_BATCH_TOKENS,
            micro_batch_overhead_tokens=TINY_MICRO_BATCH_OVERHEAD_TOKENS,
            ppo_mini_batch_size=-(-sequences // OPTIMIZER_STEPS_PER_UPDATE),
        )
        trainer = PolicyTrainer(self.model, config)
        flops = 0.0

        def once() -> float:
            nonlocal flops
            batch, total, square = self.batch(sequences, tokens)
            flops = train_flops(self.spec, tokens=total, square_tokens=square)
            old = trainer.old_log_probs(batch)
            advantages = torch.randn(batch.response_mask.shape)
            t0 = time.perf_counter()
            trainer.update(batch, advantages, old)
            return time.perf_counter() - t0

        return median_of(once), flops


def parallel_fractions(subjects: list[Subject], cores: list[int], speed: AtOneSpeed) -> dict[str, list[float]]:
    """Each preset's Amdahl fractions: its forwards and updates at :data:`PARALLEL_CASES` on
    two cores (two torch threads) against one; none on a machine with one core."""
    if len(cores) < 2:
        return {}
    by_preset: dict[str, list[float]] = {s.name: [] for s in subjects}
    two = set(cores[:2])
    for s in subjects:
        for n, tokens in PARALLEL_CASES:
            for kind, fn in (("forward", s.forward), ("train", s.train)):
                one_s, _ = speed.scaled(partial(fn, n, tokens))
                two_s, _ = speed.scaled(partial(on_cores, two, partial(fn, n, tokens)))
                by_preset[s.name].append(amdahl_fraction(one_s, two_s))
                print(
                    f"{kind:8s} {s.name:14s} {n:4d} x ~{tokens:3d} tokens: one core {one_s:6.3f} s,"
                    f" two {two_s:6.3f} s: parallel fraction {by_preset[s.name][-1]:.2f}"
                )
    return by_preset


def fractions_by_params(subjects: list[Subject], by_preset: dict[str, list[float]]) -> list[list[float]]:
    """The profile's ``parallel_fraction_by_params``: each preset's median, by its size."""
    return sorted([s.params, round(statistics.median(by_preset[s.name]), 4)] for s in subjects if by_preset.get(s.name))


def store_parallel_fractions(
    profile: dict[str, Any], subjects: list[Subject], by_preset: dict[str, list[float]]
) -> None:
    """Store the overall median and the per-size medians; print what each size measured."""
    fractions = [f for values in by_preset.values() for f in values]
    if not fractions:
        print("  parallel fractions not measured: one core")
        return
    profile["parallel_fraction"] = round(statistics.median(fractions), 4)
    profile["parallel_fraction_by_params"] = fractions_by_params(subjects, by_preset)
    for s in subjects:
        values = by_preset[s.name]
        print(
            f"  parallel_fraction {s.name}: {statistics.median(values):.3f}"
            f" (median of {len(values)} points, {min(values):.2f}-{max(values):.2f})"
        )


def time_decode_points(subjects: list[Subject], speed: AtOneSpeed) -> list[DecodePoint]:
    """Each preset's decode iterations at :data:`DECODE_CASES`, at the start's speed."""
    points: list[DecodePoint] = []
    for s in subjects:
        s.decode_iterations([32] * 8)  # warm-up
        for b, prompt in DECODE_CASES:
            lengths = s.prompt_lengths(b, prompt)
            t = speed.timed(partial(s.decode_iterations, lengths))
            points.append((s.name, b, max(lengths), t))
            print(f"decode   {s.name:14s} batch {b:4d} after {prompt:3d} tokens: {t * 1e3:7.2f} ms/iteration")
    return points


def fit_decode_points(profile: dict[str, Any], points: list[DecodePoint], max_eta: float) -> dict[str, float]:
    """The decode constants fitted to ``points`` (:func:`fit_decode`), each point's error printed.

    A decode iteration's GEMMs (a few rows) reach no more of the peak than a batched forward's,
    so eta_compute is searched up to ``max_eta``, the forward and update MFUs: at these sizes
    the fit is nearly flat in eta_compute (its worst error moved by about a point from 0.65 to
    1.0), and unbounded it ran to the grid's edge."""
    eta_compute, t_fix, c_seq, eta_kv, worst = fit_decode(profile, points, max_eta)
    fitted = {"eta_compute": eta_compute, "t_fix_s": t_fix, "c_seq_s": c_seq, "eta_kv": eta_kv}
    cost = RooflineCostModel(DeviceProfile(**{**profile, **fitted}))
    for m, b, widest, t in points:
        predicted = cost.decode_iteration_s(MODEL_CATALOGUE[m], batch=b, context_tokens=decode_context(b, widest))
        print(f"decode   {m:14s} batch {b:4d} padded to {widest:3d} tokens: fitted {predicted / t - 1:+5.0%}")
    print(
        f"  eta_compute {eta_compute:.3f}, t_fix_s {t_fix * 1e3:.3f} ms, c_seq_s {c_seq * 1e6:.1f} us/sequence,"
        f" eta_kv {eta_kv:.4f} at the start's speed (worst error {worst:.0%})"
    )
    return fitted


def reward_s_per_sequence(subject: Subject) -> float:
    """The exact-match numeric grader on replies like the math task's, and the collation of
    the graded sequences into the step's training batch."""
    replies = [f"The sum is {a}. #### {a}" for a in range(2048)]
    samples = [Sample(subject.ids(24), tuple(i >= 12 for i in range(24))) for _ in replies]
    t0 = time.perf_counter()
    for i, reply in enumerate(replies):
        grade_numeric(reply, str(i % 7))
    for start in range(0, len(samples), 256):
        collate(samples[start : start + 256], pad_token_id=subject.tokenizer.pad_token_id)
    return (time.perf_counter() - t0) / len(replies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the constants into the CPU profile")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--parallel-only",
        action="store_true",
        help="measure only the two-core parallel fractions (about 4 minutes), leaving the other constants",
    )
    parser.add_argument(
        "--decode-only",
        action="store_true",
        help="measure only the decode iteration's constants (about 4 minutes), at the profile's recorded speed",
    )
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    if cores:
        os.sched_setaffinity(0, {cores[0]})
    torch.set_num_threads(1)
    profile = json.loads(args.out.read_text())
    peak = profile["peak_flops_bf16"]
    vocab = [f"Compute {a}+{b}. The sum is {a + b}. #### {a + b}" for a in range(40) for b in range(40)]
    subjects = [Subject(name, vocab) for name in PRESETS]

    speed = AtOneSpeed()
    if args.parallel_only:
        store_parallel_fractions(profile, subjects, parallel_fractions(subjects, cores, speed))
        if args.write:
            args.out.write_text(json.dumps(profile, indent=2) + "\n")
            print(f"wrote {args.out}")
        return
    if args.decode_only:
        points = time_decode_points(subjects, speed)
        decode = fit_decode_points(profile, points, min(profile["mfu_forward"], profile["mfu_train"]))
        at_reference = speed.at_reference(decode, profile["reference_s"])
        fitted = {name: float(f"{value:.4g}") for name, value in at_reference.items()}
        print(f"  at the profile's speed (reference {profile['reference_s'] * 1e3:.1f} ms): {fitted}")
        if args.write:
            profile.update(fitted)
            args.out.write_text(json.dumps(profile, indent=2) + "\n")
            print(f"wrote {args.out}")
        return
    decode_points = time_decode_points(subjects, speed)

    prefill_points = []
    for s in subjects:
        for n, prompt in PREFILL_CASES:
            lengths = s.prompt_lengths(n, prompt)
            widest = max(lengths)  # the padded engine computes every prompt at the longest's length
            t = speed.timed(partial(s.prefill, lengths))
            prefill_points.append((forward_flops(s.spec, tokens=n * widest, square_tokens=n * widest**2), 1.0, t))
            print(f"prefill  {s.name:14s} {n:4d} x {prompt:3d} tokens: {t * 1e3:7.1f} ms")
    eta_prefill, prefill_fix, prefill_err = fit_flops_plus_extra(prefill_points, peak)

    forward_points: list[tuple[float, float, float]] = []
    train_points: list[tuple[float, float, float]] = []
    for s in subjects:
        for n, tokens in TRAIN_CASES:
            t, flops = speed.scaled(partial(s.forward, n, tokens))
            hidden_passes = n * tokens * s.spec.num_layers * s.spec.hidden_size
            forward_points.append((FRAMEWORK_FACTOR * flops, hidden_passes, t))
            t_train, flops = speed.scaled(partial(s.train, n, tokens))
            train_points.append((FRAMEWORK_FACTOR * flops, hidden_passes, t_train))
            print(f"forward  {s.name:14s} {n:4d} x ~{tokens:3d} tokens: {t:6.3f} s   train {t_train:6.3f} s")
    mfu_forward, forward_elementwise, forward_err = fit_flops_plus_extra(forward_points, peak)
    mfu_train, train_elementwise, train_err = fit_flops_plus_extra(train_points, peak)
    decode = fit_decode_points(profile, decode_points, min(mfu_forward, mfu_train))
    by_preset = parallel_fractions(subjects, cores, speed)
    reward_s, _ = speed.scaled(lambda: (reward_s_per_sequence(subjects[0]), 0.0))

    at_start = {
        **decode,
        "prefill_fix_s": prefill_fix,
        "eta_prefill": eta_prefill,
        "mfu_forward": mfu_forward,
        "mfu_train": mfu_train,
        "forward_elementwise_s": forward_elementwise,
        "train_elementwise_s": train_elementwise,
        "reward_s_per_sequence": reward_s,
    }
    fitted = {name: float(f"{value:.4g}") for name, value in speed.at_typical_speed(at_start).items()}
    f = fitted
    print(f"\nfitted on {', '.join(PRESETS)} (one core, one torch thread); worst relative error of each fit:")
    print(
        f"  eta_compute {f['eta_compute']:.3f}, t_fix_s {f['t_fix_s'] * 1e3:.3f} ms,"
        f" c_seq_s {f['c_seq_s'] * 1e6:.1f} us/sequence, eta_kv {f['eta_kv']:.4f}   (decode, errors above)"
    )
    print(
        f"  prefill_fix_s {f['prefill_fix_s'] * 1e3:.3f} ms, eta_prefill {f['eta_prefill']:.4f}   ({prefill_err:.0%})"
    )
    print(
        f"  mfu_forward {f['mfu_forward']:.4f}, forward_elementwise_s {f['forward_elementwise_s']:.3e}"
        f"   ({forward_err:.0%})"
    )
    print(f"  mfu_train   {f['mfu_train']:.4f}, train_elementwise_s {f['train_elementwise_s']:.3e}   ({train_err:.0%})")
    store_parallel_fractions(profile, subjects, by_preset)
    print(f"  reward_s_per_sequence {f['reward_s_per_sequence'] * 1e6:.1f} us")
    print(
        f"  reference_s {f['reference_s'] * 1e3:.1f} ms: the median speed over the measurement, which ran at"
        f" {min(speed.ratios):.2f}-{max(speed.ratios):.2f}x the start's time ({speed.start_s * 1e3:.1f} ms);"
        " every point was scaled to one speed"
    )
    if args.write:
        profile.update(fitted)
        args.out.write_text(json.dumps(profile, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
