"""Measure the CPU profile's engine constants with the project's own torch engine and trainer.

    .venv/bin/python scripts/measure_cpu_engine_profile.py [--write] [--out PATH] [--parallel-only]
    .venv/bin/python scripts/measure_cpu_engine_profile.py --engine vllm [--write]

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

``--engine vllm`` (about 7 minutes) measures the rollout constants of :class:`VllmRolloutEngine`
instead, on the same pinned core, on both presets saved as checkpoints and on the example
checkpoint (``scripts/make_example_checkpoint.py``; left out where it is missing): the decode
iteration's (its paged cache read as the rows' own contexts, :mod:`jigsaw_engine.runtime.rollout_timing`),
the prefill's (FLOPs at the prompts' own lengths; vLLM cuts a large batch's into several steps,
all timed), and ``weight_load_s``, one in-memory reload of the weights. ``--write`` stores
them, at the profile's recorded speed, as the profile's ``rollout_engines.vllm`` override,
which a real run whose rollouts are on vLLM is forecast with.
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
from jigsaw_engine.cost.device import ROLLOUT_ENGINES_KEY
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
from jigsaw_engine.runtime import rollout_timing
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
    device_profile,
    fit_decode,
    fit_flops_plus_extra,
    fit_prefill,
    median_of,
)
from jigsaw_engine.spec.checkpoints import model_from_checkpoint_dir
from jigsaw_engine.spec.models import MODEL_CATALOGUE, ModelSpec
from jigsaw_engine.train.policy_trainer import ActorConfig, PolicyTrainer
from jigsaw_engine.train.token_batch import Sample, TokenBatch, batch_log_probs, collate

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "jigsaw_engine" / "cost" / "profiles" / "cpu.json"
EXAMPLE_CHECKPOINT = ROOT / "var" / "models" / "tiny-qwen3-arith"


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
    cost = RooflineCostModel(device_profile(profile, **fitted))
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


VLLM_DESCRIPTION = (
    "measured {when} by scripts/measure_cpu_engine_profile.py --engine vllm with the project's"
    " VllmRolloutEngine (vLLM's CPU build, its engine core in the process, sampled requests drawn by"
    " the portable sampler) on one pinned core, one torch thread, at the profile's reference_s speed"
    " (each point timed between two runs of the reference work): t_fix_s, c_seq_s, eta_kv and"
    " eta_compute fitted to decode iterations at batch 1-256 after prompts of about 32 tokens, 1-128"
    " after about 120 and at the checkpoint jobs' shapes (128 and 256 after about 24), timed once every"
    " request decodes, the KV term at the rows' own contexts (paged: padded_kv_cache false);"
    " prefill_fix_s, prefill_seq_s and eta_prefill to prefills of 1-256 prompts of about 8-160 tokens,"
    " a cost per call, one per sequence (setting each request up, drawing its first token) and FLOPs at"
    " their own lengths (vLLM cuts a large batch's prefill into several steps; all timed together);"
    " weight_load_s one in-memory load_weights of the whole model (vLLM's reload and the reset of its"
    " prefix cache), charged at each weight sync; rollout_threads_parallel_fraction 0 by rule: the"
    " engines of one process (their engine cores in it) take every engine call by turns at one lock;"
    " {fits}."
)


class VllmSubject:
    """One model on a :class:`VllmRolloutEngine` of its own (a preset saved as a checkpoint, or
    a checkpoint folder), started on the pinned core."""

    def __init__(self, name: str, folder: Path, spec: ModelSpec, weights: dict[str, torch.Tensor]) -> None:
        from jigsaw_engine.rollout.vllm_engine import VllmRolloutEngine

        core = os.sched_getaffinity(0)
        self.name, self.spec, self.weights = name, spec, weights
        self.engine = VllmRolloutEngine(folder, max_num_seqs=256)
        os.sched_setaffinity(0, core)  # as it was, whatever vLLM's start bound
        torch.set_num_threads(1)
        self.vocab = int(json.loads((folder / "config.json").read_text())["vocab_size"])
        self.rng = random.Random(0)

    def prompts(self, count: int, tokens: int) -> list[tuple[int, ...]]:
        """``count`` random prompts spread over ``tokens`` / 2 .. 3 ``tokens`` / 2, as :class:`Subject`'s."""
        lengths = [self.rng.randint(max(1, tokens // 2), tokens * 3 // 2) for _ in range(count)]
        return [tuple(self.rng.randrange(3, self.vocab) for _ in range(n)) for n in lengths]


def vllm_subjects(vocab: list[str]) -> list[VllmSubject]:
    """Both presets, written as checkpoints, and the example checkpoint where it has been made."""
    import tempfile

    from jigsaw_engine.models.loading import load_policy, save_policy

    subjects = []
    for preset in PRESETS:
        s = Subject(preset, vocab)
        folder = save_policy(s.model, s.tokenizer, Path(tempfile.mkdtemp(prefix=f"{preset}-")))
        subjects.append(VllmSubject(preset, folder, s.spec, s.model.state_dict()))
    if (EXAMPLE_CHECKPOINT / "config.json").is_file():
        policy = load_policy(EXAMPLE_CHECKPOINT)
        spec = model_from_checkpoint_dir(str(EXAMPLE_CHECKPOINT))
        subjects.append(VllmSubject(spec.name, EXAMPLE_CHECKPOINT, spec, policy.model.state_dict()))
    else:
        print(f"  {EXAMPLE_CHECKPOINT} not made: the presets alone (scripts/make_example_checkpoint.py)")
    return subjects


def measure_vllm(profile: dict[str, Any], vocab: list[str], speed: AtOneSpeed) -> tuple[dict[str, float], str]:
    """The vLLM engine's rollout constants at the profile's recorded speed, and the line its
    override's description gives of their fits."""
    subjects = vllm_subjects(vocab)
    time_decode = rollout_timing.decode_iteration_s
    models = {s.name: s.spec for s in subjects}
    decode: list[DecodePoint] = []
    contexts: list[float] = []
    prefill: list[tuple[float, int, float]] = []
    for s in subjects:
        rollout_timing.decode_iteration_s(
            s.engine, s.prompts(8, 32), DECODE_TOKENS, max_model_len=s.engine.max_model_len
        )  # warm-up
        for b, prompt in rollout_timing.PAGED_DECODE_CASES:
            prompts = s.prompts(b, prompt)

            def once(prompts: list[tuple[int, ...]] = prompts, s: VllmSubject = s) -> tuple[float, float]:
                runs = [
                    time_decode(s.engine, prompts, DECODE_TOKENS, max_model_len=s.engine.max_model_len)
                    for _ in range(3)
                ]
                return statistics.median(t for t, _ in runs), runs[0][1]

            t, context = speed.scaled(once)
            decode.append((s.name, b, max(map(len, prompts)), t))
            contexts.append(context)
            print(f"decode   {s.name:16s} batch {b:4d} after {prompt:3d} tokens: {t * 1e3:7.2f} ms/iteration")
        for n, prompt in rollout_timing.PAGED_PREFILL_CASES:
            prompts = s.prompts(n, prompt)
            t = speed.timed(partial(rollout_timing.prefill_s, s.engine, prompts))
            lengths = [len(p) for p in prompts]
            prefill.append(
                (forward_flops(s.spec, tokens=sum(lengths), square_tokens=sum(x * x for x in lengths)), n, t)
            )
            print(f"prefill  {s.name:16s} {n:4d} x {prompt:3d} tokens: {t * 1e3:7.1f} ms")
    eta_compute, t_fix, c_seq, eta_kv, decode_err = fit_decode(
        profile, decode, min(profile["mfu_forward"], profile["mfu_train"]), contexts=contexts, models=models
    )
    fitted = {"eta_compute": eta_compute, "t_fix_s": t_fix, "c_seq_s": c_seq, "eta_kv": eta_kv}
    cost = RooflineCostModel(device_profile(profile, **fitted, padded_kv_cache=False))
    for (m, b, _, t), context in zip(decode, contexts, strict=True):
        predicted = cost.decode_iteration_s(models[m], batch=b, context_tokens=context)
        print(f"decode   {m:16s} batch {b:4d} holding {context:6.0f} tokens: fitted {predicted / t - 1:+5.0%}")
    eta_prefill, prefill_fix, prefill_seq, prefill_err = fit_prefill(prefill, profile["peak_flops_bf16"])
    names = [s.name for s in subjects for _ in rollout_timing.PAGED_PREFILL_CASES]
    for (flops, n, t), name in zip(prefill, names, strict=True):
        predicted = flops / profile["peak_flops_bf16"] / eta_prefill + prefill_fix + prefill_seq * n
        print(f"prefill  {name:16s} {n:4d} prompts: fitted {predicted / t - 1:+5.0%}")
    loads = {s.name: speed.timed(partial(rollout_timing.weight_load_s, s.engine, s.weights)) for s in subjects}
    for name, t in loads.items():
        print(f"weight load {name:16s} {t * 1e3:6.1f} ms")
    at_start = {**fitted, "prefill_fix_s": prefill_fix, "prefill_seq_s": prefill_seq, "eta_prefill": eta_prefill}
    at_start["weight_load_s"] = statistics.median(loads.values())
    at_reference = speed.at_reference(at_start, profile["reference_s"])
    constants = {name: float(f"{value:.4g}") for name, value in at_reference.items()}
    loaded = ", ".join(f"{name} {t / speed.start_s * profile['reference_s'] * 1e3:.0f} ms" for name, t in loads.items())
    fits = (
        f"on {', '.join(models)}; decode worst error {decode_err:.0%}, prefill {prefill_err:.0%};"
        f" weight loads {loaded} (the median kept)"
    )
    print(f"  at the profile's speed (reference {profile['reference_s'] * 1e3:.1f} ms): {constants}")
    print(f"  {fits}; the machine ran at {min(speed.ratios):.2f}-{max(speed.ratios):.2f}x the start's time")
    return constants, fits


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
    parser.add_argument(
        "--engine",
        choices=("torch", "vllm"),
        default="torch",
        help="vllm: only the vLLM engine's rollout constants (about 7 minutes), as the profile's override for it",
    )
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    if cores:
        os.sched_setaffinity(0, {cores[0]})
    torch.set_num_threads(1)
    profile = json.loads(args.out.read_text())
    peak = profile["peak_flops_bf16"]
    vocab = [f"Compute {a}+{b}. The sum is {a + b}. #### {a + b}" for a in range(40) for b in range(40)]
    speed = AtOneSpeed()
    if args.engine == "vllm":
        vllm, fits = measure_vllm(profile, vocab, speed)
        if args.write:
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            engines = profile.setdefault(ROLLOUT_ENGINES_KEY, {})
            engines["vllm"] = {"description": VLLM_DESCRIPTION.format(when=when, fits=fits), **vllm}
            engines["vllm"]["padded_kv_cache"] = False
            engines["vllm"]["rollout_threads_parallel_fraction"] = 0.0  # one lock for every engine call
            args.out.write_text(json.dumps(profile, indent=2) + "\n")
            print(f"wrote {args.out}")
        return
    subjects = [Subject(name, vocab) for name in PRESETS]
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
