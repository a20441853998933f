"""Fitting the CPU profile's engine constants to timings of the project's own torch engine and
trainer (``scripts/measure_cpu_engine_profile.py`` takes them): the cost model's decode
iteration, FLOPs at an efficiency plus a cost per call or per token, Amdahl's parallel fraction,
and the scaling of points timed while the machine's speed swings to one speed."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from jigsaw_engine.cost.cost_model import RooflineCostModel
from jigsaw_engine.cost.device import ROLLOUT_ENGINES_KEY, TIME_FIELDS, DeviceProfile
from jigsaw_engine.runtime.machine_speed import reference_seconds
from jigsaw_engine.spec.models import MODEL_CATALOGUE, ModelSpec

PRESETS = ("tiny-qwen2-1m", "tiny-qwen2-6m")
DECODE_CASES = (
    tuple((b, 32) for b in (1, 8, 32, 64, 128, 256))
    + tuple((b, 160) for b in (1, 8, 32, 64, 128))
    + ((8, 8), (64, 8), (256, 8), (2, 100), (4, 100))
)
"""(sequences, prompt tokens) of the decode points: short prompts, and the long contexts of
multi-turn conversations (the presets hold 256 positions). No example job holds more than 32
long conversations at once; 256 of them (a cache of 256 x 240 tokens) decoded 1.4-2x slower
than the linear model of the other points, as the cache outgrows the CPU's caches. The last
five are the example jobs' own: arithmetic's 8-token prompts, and a few conversations
rejoining after a turn."""
DECODE_TOKENS = 16  # iterations per batch after the prefill one
PREFILL_CASES = (
    (1, 8),
    (1, 64),
    (4, 24),
    (8, 32),
    (32, 64),
    (128, 32),
    (64, 96),
    (8, 192),
    (32, 160),
)  # (sequences, prompt tokens): the first three are turns rejoining alone or a few at once
PARALLEL_CASES = ((256, 24), (128, 60), (32, 120))
"""(sequences, tokens each) of the forwards and updates timed on one core and on two: the
example jobs' batches (arithmetic, self-refinement, retrieval)."""
TRAIN_CASES = ((256, 12), (64, 40), (256, 40), (128, 120), (64, 200), (32, 180))  # (sequences, tokens each)


DecodePoint = tuple[str, int, int, float]
"""(preset, batch, longest prompt's tokens, seconds per decode iteration)."""


def device_profile(raw: Mapping[str, Any], **changes: Any) -> DeviceProfile:
    """A profile file's constants (its per-engine overrides left out, :data:`ROLLOUT_ENGINES_KEY`)
    with ``changes``: what a fit prices its points with."""
    return DeviceProfile(**{**{k: v for k, v in raw.items() if k != ROLLOUT_ENGINES_KEY}, **changes})


def decode_context(batch: int, widest: int) -> float:
    """Mean KV-cache tokens a decode point's timed iterations read: the torch engine's cache is
    ``batch`` rows as wide as the longest prompt, plus half the replies (the simulator charges
    a padded cache so, :attr:`DeviceProfile.padded_kv_cache`)."""
    return batch * (widest + DECODE_TOKENS / 2)


def fit_decode(
    profile: dict[str, Any],
    points: list[DecodePoint],
    max_eta: float = 1.0,
    *,
    contexts: Sequence[float] | None = None,
    models: Mapping[str, ModelSpec] = MODEL_CATALOGUE,
) -> tuple[float, float, float, float, float]:
    """(eta_compute, t_fix_s, c_seq_s, eta_kv, worst relative error) of the cost model's decode
    iteration fitted to decode points. ``contexts``: the KV tokens each point's iterations
    read, for a paged engine (by default a padded cache's, :func:`decode_context`); ``models``
    names the points' models.

    A tiny model's decode GEMMs are far from the host's peak (one thread, 128-256 wide
    matrices), and with eta_compute left at the numpy figure its whole cost lands in c_seq,
    the same for both presets: 1.5x too slow for tiny-qwen2-1m at batch 256, 0.8x for 6m.
    So eta_compute is searched on a grid up to ``max_eta``, and t_fix, c_seq and the KV term's
    1/eta_kv (all >= 0) fitted in relative least squares for each value; the least worst error
    wins. The KV term is the engine's, not numpy's: reading a growing cache through the model's
    attention (and concatenating it) cost about 10x what a 1 GiB numpy read says per byte, so a
    multi-turn rollout's long contexts came out 1.5x too fast.
    """
    read = list(contexts) if contexts is not None else [decode_context(b, widest) for _, b, widest, _ in points]
    kv_unit = [  # seconds of KV reads at eta_kv = 1, from the mean context of the timed iterations
        tokens * models[m].kv_bytes_per_token / profile["hbm_bytes_per_s"]
        for (m, *_), tokens in zip(points, read, strict=True)
    ]
    best: tuple[float, float, float, float, float] | None = None
    for step in range(5, math.floor(100 * max_eta) + 1):
        eta = step / 100
        cost = RooflineCostModel(device_profile(profile, t_fix_s=0.0, c_seq_s=0.0, eta_compute=eta))
        rest = [  # the weights and the GEMMs: the iteration without fixed costs and KV reads
            cost.decode_iteration_s(models[m], batch=b, context_tokens=0.0) for m, b, _, _ in points
        ]
        matrix = torch.tensor(
            [[1.0 / t, b / t, kv / t] for (_, b, _, t), kv in zip(points, kv_unit, strict=True)], dtype=torch.float64
        )
        target = torch.tensor([(t - r) / t for (*_, t), r in zip(points, rest, strict=True)], dtype=torch.float64)
        t_fix, c_seq, inv_eta_kv = torch.linalg.lstsq(matrix, target.unsqueeze(1)).solution.squeeze(1).tolist()
        if min(t_fix, c_seq, inv_eta_kv) <= 0:
            continue
        predicted = [
            t_fix + c_seq * b + kv * inv_eta_kv + r for (_, b, _, _), kv, r in zip(points, kv_unit, rest, strict=True)
        ]
        err = worst_error(predicted, [t for *_, t in points])
        if best is None or err < best[4]:
            best = (eta, t_fix, c_seq, 1.0 / inv_eta_kv, err)
    if best is None:
        raise SystemExit(f"decode: no eta_compute in 0.05-{max_eta:.2f} gives positive t_fix, c_seq and eta_kv")
    return best


def fit_flops_plus_extra(points: list[tuple[float, float, float]], peak: float) -> tuple[float, float, float]:
    """(efficiency, k, worst relative error) of ``FLOPs / (efficiency x peak) + k x extra``
    fitted in relative least squares to (FLOPs, extra, seconds) points, k >= 0 (else FLOPs
    alone). ``extra`` is 1 for a fixed cost per call (a prefill's), or token x layer x hidden
    size for the work beside the matrix multiplies: with an MFU alone, tiny-qwen2-1m's updates
    came out 0-22% short and tiny-qwen2-6m's 4-18% long (a narrow model spends more of its
    time there, per FLOP, than a wide one)."""
    matrix = torch.tensor([[f / peak / t, x / t] for f, x, t in points], dtype=torch.float64)
    target = torch.ones(len(points), 1, dtype=torch.float64)
    inv_eta, k = torch.linalg.lstsq(matrix, target).solution.squeeze(1).tolist()
    if k < 0:  # nothing beside the FLOPs to be seen
        k, inv_eta = 0.0, fit_scale([f / peak for f, _, _ in points], [t for _, _, t in points])
    predicted = [f / peak * inv_eta + k * x for f, x, _ in points]
    return 1.0 / inv_eta, k, worst_error(predicted, [t for _, _, t in points])


def fit_prefill(points: list[tuple[float, int, float]], peak: float) -> tuple[float, float, float, float]:
    """(efficiency, seconds per call, seconds per sequence, worst relative error) of
    ``FLOPs / (efficiency x peak) + per call + per sequence x sequences`` fitted in relative
    least squares to (FLOPs, sequences, seconds) prefill points, for an engine that pays per
    request (vLLM: setting each one up, drawing its first token); the per-call and
    per-sequence costs >= 0 (one that comes out negative is left out and the rest refitted)."""
    columns = {"flops": True, "call": True, "sequence": True}
    while True:
        rows = [
            [v for v, on in zip((f / peak / t, 1.0 / t, n / t), columns.values(), strict=True) if on]
            for f, n, t in points
        ]
        matrix = torch.tensor(rows, dtype=torch.float64)
        solution = torch.linalg.lstsq(matrix, torch.ones(len(points), 1, dtype=torch.float64)).solution
        values = iter(solution.squeeze(1).tolist())
        fitted = {name: next(values) if on else 0.0 for name, on in columns.items()}
        negative = [name for name in ("call", "sequence") if fitted[name] < 0]
        if not negative:
            break
        columns[negative[0]] = False
    inv_eta, call, per_sequence = fitted["flops"], fitted["call"], fitted["sequence"]
    predicted = [f / peak * inv_eta + call + per_sequence * n for f, n, _ in points]
    return 1.0 / inv_eta, call, per_sequence, worst_error(predicted, [t for *_, t in points])


def amdahl_fraction(one: float, two: float) -> float:
    """Amdahl's fraction of two equal workers' time that overlaps, from their time one after
    the other (or on one core) and at once (on two): with ``T`` a worker's time alone, two at
    once take ``(2 - f) T``. 1 when at once takes half as long, 0 when it takes as long;
    clamped to [0, 1] (a pair of noisy timings can land outside)."""
    return min(1.0, max(0.0, 2.0 * (1.0 - two / one)))


EFFICIENCIES = ("eta_compute", "eta_kv", "eta_prefill", "mfu_forward", "mfu_train")
"""The fitted fractions of the host's rates (which stay as measured): a slower machine has lower ones."""


def median_of(fn: Callable[[], float], repeats: int = 3) -> float:
    """Median of ``repeats`` timings (each ``fn`` returns its own seconds, on data of its own).

    Not the least: a real step meets its batch once, and the same batch timed again ran 1.5x
    faster than fresh ones (0.10 s against 0.15-0.19 s for a 256 x 12-token forward), so
    best-of timings made every constant look faster than the runs it forecasts."""
    return statistics.median(fn() for _ in range(repeats))


class AtOneSpeed:
    """Times points as if the machine kept one speed throughout.

    This machine's speed swings by up to 1.8x within seconds (the reference work ran 0.26 s
    and 0.48 s minutes apart, 0.26 s and 0.40 s seconds apart), so each point is timed between
    two runs of the reference work and scaled by their mean against the start's. The constants
    fitted to those points describe the machine at the start's speed; :meth:`at_typical_speed`
    then moves them to the median speed seen over the whole measurement, which is what
    ``reference_s`` records and a real run scales by its own reference timing."""

    def __init__(self) -> None:
        self.start_s = statistics.median(reference_seconds() for _ in range(3))
        self.ratios: list[float] = []

    def scaled(self, fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
        """``fn``'s (seconds, other) with its seconds at the start's speed."""
        before = reference_seconds()
        seconds, other = fn()
        ratio = (before + reference_seconds()) / 2 / self.start_s
        self.ratios.append(ratio)
        return seconds / ratio, other

    def timed(self, fn: Callable[[], float]) -> float:
        """The median of ``fn``'s timings (:func:`median_of`) at the start's speed."""
        return self.scaled(lambda: (median_of(fn), 0.0))[0]

    @property
    def typical_ratio(self) -> float:
        return statistics.median(self.ratios)

    def at_typical_speed(self, fitted: dict[str, float]) -> dict[str, float]:
        """Fitted constants (at the start's speed) at the median speed, the reference's time with them."""
        return {**_at_speed(fitted, self.typical_ratio), "reference_s": self.start_s * self.typical_ratio}

    def at_reference(self, fitted: dict[str, float], reference_s: float) -> dict[str, float]:
        """Fitted constants (at the start's speed) at the speed where the reference work takes
        ``reference_s``: a part re-measured joins the profile's other constants."""
        return _at_speed(fitted, reference_s / self.start_s)


def _at_speed(fitted: dict[str, float], factor: float) -> dict[str, float]:
    """Constants of a machine ``factor`` times slower: times longer, efficiencies lower."""
    return {
        name: value * factor if name in TIME_FIELDS else value / factor if name in EFFICIENCIES else value
        for name, value in fitted.items()
    }


def fit_scale(xs: list[float], ys: list[float]) -> float:
    """Least-squares ``k`` of ``y = k x`` in relative terms (each point weighs the same)."""
    return statistics.fmean(y / x for x, y in zip(xs, ys, strict=True))


def worst_error(predicted: list[float], measured: list[float]) -> float:
    return max(abs(p / m - 1.0) for p, m in zip(predicted, measured, strict=True))
