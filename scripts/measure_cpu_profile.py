"""Measure this machine's CPU as a device profile (``jigsaw_engine/cost/profiles/cpu.json``).

    python3 scripts/measure_cpu_profile.py [--out PATH]

Needs only numpy (the project venv does not have it: run with any Python 3.11+ that does).
Uses every core (``JIGSAW_CPU_THREADS`` overrides) and takes under a minute. Everything runs in
fp32 (numpy has no bf16 GEMM), so ``peak_flops_bf16`` holds the measured fp32 GEMM peak. The
"device" is the whole host; the profile's keys, and how each is obtained, follow
``jigsaw_engine/cost/cost_model.py``:

- peak_flops_bf16: best fp32 GEMM, square (2048-4096) or layer-shaped (below);
- hbm_bytes_per_s: best of copy and triad on 1 GiB arrays, one slice per thread;
- eta_weights, linear_op_overhead_s: least squares ``t = overhead + bytes / (eta * bw)`` of
  ``y = x @ W`` over realistic layer matrices at 2-4 tokens (memory-bound), each call on a fresh
  copy of ``W`` so that it streams from DRAM and not from the (large) L3; 1, 8 and 16 tokens
  are printed against the cost model's linear op as a check;
- eta_compute: a Qwen3-0.6B layer's four GEMMs at 2048 tokens, against the peak (measured
  round-robin with it);
- eta_kv: decode attention (scores, softmax, weighted sum) over 1 GiB of fp32 K/V;
- eta_prefill: one numpy Qwen3-0.6B layer forward at 1024 tokens, counted as 2 FLOPs per
  weight per token like ``prefill_s``;
- t_fix_s, c_seq_s: intercept and slope over batch of a numpy decode loop (28 layers of tiny
  matrices, then temperature sampling over a 151,936-token vocabulary per sequence);
- set by rule: nvlink and pcie = copy bandwidth (between devices on one host, and from host
  memory, data moves by a memory copy); inter_node = 10 Gb/s Ethernet (not measurable on one host); sync_bytes_per_s =
  one-thread copy bandwidth and sync_alpha_s = the time to copy a 28-layer model's tensors of one
  element each (an in-process weight copy); mfu_forward, mfu_train = 0.5x, 0.4x eta_compute.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

THREADS = int(os.environ.get("JIGSAW_CPU_THREADS", os.cpu_count() or 1))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)  # BLAS reads these when numpy is imported

import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "jigsaw_engine" / "cost" / "profiles" / "cpu.json"
F32 = 4  # bytes per element
BIG = 2**28  # elements of each bandwidth array (1 GiB), several times any L3 share
TOKENS = (1, 2, 4, 8, 16)
# Fit on 2 and 4 tokens: numpy's batched (sgemm) path, where compute is still a few % of the
# weight time. A single token takes the gemv kernel, which streams about 2.5x faster; the cost
# model has one eta_weights, and decode batches are rarely 1. 8-16 tokens check the smooth max.
FIT_TOKENS = (2, 4)
# (K, N) of y = x @ W: Qwen2.5-0.5B, Qwen3-0.6B, Qwen2.5-1.5B and Qwen2.5-3B linear layers, 3-90 MB.
SHAPES = (
    (896, 896),
    (896, 4864),
    (4864, 896),
    (2048, 1024),
    (3072, 1024),
    (1024, 4096),
    (2048, 2048),
    (1024, 6144),
    (1536, 8960),
    (2048, 11008),
)
# Qwen3-0.6B: hidden 1024, 16 query heads and 8 KV heads of 128, MLP 3072, 28 layers.
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, MLP, LAYERS, VOCAB = 1024, 16, 8, 128, 3072, 28, 151_936
LAYER_SHAPES = (
    (HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM),  # QKV
    (HEADS * HEAD_DIM, HIDDEN),  # output projection
    (HIDDEN, 2 * MLP),  # gate + up
    (MLP, HIDDEN),  # down
)
INTER_NODE_BYTES_PER_S = 1.25e9  # 10 Gb/s Ethernet: rule, not measured
MFU_FORWARD_OF_ETA, MFU_TRAIN_OF_ETA = 0.5, 0.4  # rule: framework training/forward on top of GEMMs

POOL = ThreadPoolExecutor(THREADS)
RNG = np.random.default_rng(0)


def best_time(fn: Callable[[], object], repeats: int, warmup: bool = True) -> float:
    """Fastest of ``repeats`` runs, in seconds (the least disturbed by other load)."""
    if warmup:
        fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def parallel(fn: Callable[..., object], *arrays: np.ndarray) -> None:
    """``fn`` on one slice of each 1-D array per thread, all at once (numpy drops the GIL)."""
    list(POOL.map(fn, *(np.array_split(a, THREADS) for a in arrays)))


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape, dtype=np.float32)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def mem_total_bytes() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return float(line.split()[1]) * 1024  # kB
    raise RuntimeError("no MemTotal in /proc/meminfo")


def busy_cpu_s() -> float:
    """CPU seconds all processes have used since boot (user, nice, system, irq, softirq, steal)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def blas_name() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas['version']}"
    except Exception:  # older numpy: no dict mode
        return "BLAS unknown"


def smooth_max(a: float, b: float) -> float:
    return (a * a + b * b) ** 0.5  # the cost model's ROOFLINE_SMOOTHING_P = 2


def gemms(rounds: int = 4, tokens: int = 2048) -> tuple[dict[str, float], float]:
    """Best FLOP/s of square GEMMs (2048-4096) and the FLOP/s of a Qwen3-0.6B layer's four GEMMs
    at ``tokens`` tokens (sum of flops / sum of best times). The two are measured round-robin so
    that the ratio (eta_compute) compares them under the same machine state: this VM's GEMM
    rate drifts by up to 1.5x from minute to minute."""
    cases = {f"{n}^3": (rand(n, n), rand(n, n)) for n in (2048, 3072, 4096)}
    cases |= {f"{k}x{n}": (rand(tokens, k), rand(k, n)) for k, n in LAYER_SHAPES}
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(rounds):  # the first round warms up
        for name, (a, b) in cases.items():
            best[name] = min(best[name], best_time(lambda a=a, b=b: a @ b, 1, warmup=False))
    rates = {name: 2.0 * a.shape[0] * a.shape[1] * b.shape[1] / best[name] for name, (a, b) in cases.items()}
    layer_flops = sum(2.0 * tokens * k * n for k, n in LAYER_SHAPES)
    layer_rate = layer_flops / sum(best[f"{k}x{n}"] for k, n in LAYER_SHAPES)
    return rates, layer_rate


def bandwidth(src: np.ndarray, dst: np.ndarray, c: np.ndarray) -> dict[str, float]:
    """Bytes the program reads and writes per second (STREAM convention: no write-allocate)."""

    def triad(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:  # a = b + 3c, two passes
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)

    nbytes = src.nbytes
    return {
        "copy": 2 * nbytes / best_time(lambda: parallel(np.copyto, dst, src), 3),
        "triad": 5 * nbytes / best_time(lambda: parallel(triad, dst, src, c), 3),
        "copy_1thread": 2 * nbytes / best_time(lambda: np.copyto(dst, src), 3),
    }


def weight_streaming(buf: np.ndarray, rounds: int = 2) -> dict[tuple[int, int, int], float]:
    """Seconds per ``x @ W`` for each (K, N, tokens): a pass of ``x @ W`` over the copies of W
    that fill ``buf`` (so no call finds its matrix in cache), at least 16 calls, giving the lower
    quartile of its per-call times (robust to other load and to a lucky call); the best of
    ``rounds`` sweeps over all the points, a few seconds apart."""
    times: dict[tuple[int, int, int], float] = {}
    for _ in range(rounds):
        for k, n in SHAPES:
            views = [buf[i * k * n : (i + 1) * k * n].reshape(k, n) for i in range(buf.size // (k * n))]
            for tokens in TOKENS:
                x = rand(tokens, k)
                calls = []
                for i in range(max(16, len(views))):
                    t0 = time.perf_counter()
                    x @ views[i % len(views)]
                    calls.append(time.perf_counter() - t0)
                q1 = float(np.percentile(calls, 25))
                times[(k, n, tokens)] = min(q1, times.get((k, n, tokens), q1))
    return times


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope of ys against xs."""
    slope, intercept = np.polyfit(np.asarray(xs), np.asarray(ys), 1)
    return float(intercept), float(slope)


def kv_read(buf: np.ndarray) -> float:
    """Bytes per second of one decode step's attention over the K/V cache held in ``buf``."""
    ctx = buf.size // (2 * KV_HEADS * HEAD_DIM)
    k = buf[: buf.size // 2].reshape(KV_HEADS, ctx, HEAD_DIM)
    v = buf[buf.size // 2 :].reshape(KV_HEADS, ctx, HEAD_DIM)
    q = rand(KV_HEADS, HEAD_DIM, 1)

    def attend() -> None:
        s = (k @ q)[..., 0]  # (heads, ctx)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        p[:, None, :] @ v

    return buf.nbytes / best_time(attend, 3)


def layer_weights(scale: float = 0.02) -> list[np.ndarray]:
    return [rand(k, n) * scale for k, n in LAYER_SHAPES]


def layer_forward(
    h: np.ndarray,
    weights: list[np.ndarray],
    kv: tuple[np.ndarray, np.ndarray] | None = None,
    heads: int = HEADS,
    kv_heads: int = KV_HEADS,
) -> np.ndarray:
    """One Qwen3-style layer (RMSNorm, GQA attention, SwiGLU MLP; no RoPE) on ``h`` (tokens, hidden).
    Without ``kv`` it is a causal prefill over ``h``; with it, decode against that cache."""
    wqkv, wo, wup, wdown = weights
    t, hd = h.shape[0], wqkv.shape[1] // (heads + 2 * kv_heads)
    x = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
    qkv = x @ wqkv
    q = qkv[:, : heads * hd].reshape(t, heads, hd).transpose(1, 0, 2)
    if kv is None:
        k = qkv[:, heads * hd : (heads + kv_heads) * hd].reshape(t, kv_heads, hd).transpose(1, 0, 2)
        v = qkv[:, (heads + kv_heads) * hd :].reshape(t, kv_heads, hd).transpose(1, 0, 2)
    else:
        k, v = kv
    group = heads // kv_heads
    k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
    if kv is None:
        s += np.triu(np.full((t, t), -np.inf, np.float32), 1)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    h = h + (p @ v).transpose(1, 0, 2).reshape(t, -1) @ wo
    x = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
    gate, up = np.split(x @ wup, 2, axis=-1)
    return h + (gate / (1.0 + np.exp(-gate)) * up) @ wdown


def prefill_flops_per_s(tokens: int = 1024) -> float:
    weights = layer_weights()
    h = rand(tokens, HIDDEN)
    params = sum(w.size for w in weights)
    return 2.0 * params * tokens / best_time(lambda: layer_forward(h, weights), 3)


def decode_loop_overheads() -> tuple[float, float]:
    """(per-iteration, per-sequence) seconds of a numpy decode loop: 28 layers of tiny matrices
    (hidden 64, 32 tokens of cache) so that only dispatch counts, then temperature sampling over
    the full vocabulary for each sequence; the weights' own streaming is charged elsewhere."""
    # 8 query and 2 KV heads of 8: the shapes of a real layer, none of its bytes
    tiny = [rand(64, 96) * 0.1, rand(64, 64) * 0.1, rand(64, 256) * 0.1, rand(128, 64) * 0.1]
    cache = (rand(2, 32, 8), rand(2, 32, 8))
    logits = rand(16, VOCAB)

    def iteration(batch: int) -> list[int]:
        h = rand(batch, 64)
        for _ in range(LAYERS):
            h = layer_forward(h, tiny, cache, heads=8, kv_heads=2)
        tokens = []
        for row in logits[:batch]:  # per sequence: softmax at temperature 1, inverse-CDF draw
            cdf = np.cumsum(np.exp(row - row.max()))
            tokens.append(int(np.searchsorted(cdf, RNG.random() * cdf[-1])))
        return tokens

    batches = (1, 4, 8, 16)
    times = [best_time(lambda b=b: iteration(b), 5) for b in batches]
    t_fix, c_seq = fit_line([float(b) for b in batches], times)
    return max(t_fix, 0.0), max(c_seq, 0.0)


def sync_alpha_s() -> float:
    """Fixed cost of an in-process weight copy: one copy per tensor of a 28-layer model
    (11 tensors a layer plus embeddings, final norm, head), each of one element."""
    src = [np.ones(1, np.float32) for _ in range(LAYERS * 11 + 3)]
    dst = [np.empty(1, np.float32) for _ in src]
    return best_time(lambda: [np.copyto(d, s) for d, s in zip(dst, src, strict=True)], 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    start, busy0, own0 = time.perf_counter(), busy_cpu_s(), own_cpu_s()

    gemm_rates, layer_rate = gemms()
    peak = max(gemm_rates.values())  # the best GEMM seen, square or layer-shaped
    eta_compute = layer_rate / peak
    src, dst, c = np.full(BIG, 0.01, np.float32), np.zeros(BIG, np.float32), np.full(BIG, 0.02, np.float32)
    bw = bandwidth(src, dst, c)
    del dst, c
    hbm = max(bw["copy"], bw["triad"])

    stream = weight_streaming(src)
    points = [(F32 * k * n, s) for (k, n, t), s in stream.items() if t in FIT_TOKENS]
    intercept, slope = fit_line([b for b, _ in points], [s for _, s in points])
    eta_weights, overhead = min(1.0, 1.0 / (slope * hbm)), max(intercept, 0.0)

    eta_kv = min(1.0, kv_read(src) / hbm)
    del src
    eta_prefill = min(1.0, prefill_flops_per_s() / peak)
    t_fix, c_seq = decode_loop_overheads()
    alpha = sync_alpha_s()
    elapsed = time.perf_counter() - start
    # Share of the CPUs other processes used meanwhile: the measurement's quality (0 is ideal).
    others = max(0.0, (busy_cpu_s() - busy0) - (own_cpu_s() - own0)) / (elapsed * (os.cpu_count() or 1))
    gemv_speedup = float(np.median([stream[(k, n, 2)] / stream[(k, n, 1)] for k, n in SHAPES]))

    def model_s(k: int, n: int, t: int) -> float:  # the cost model's linear-op time, fp32 bytes
        return overhead + smooth_max(F32 * k * n / (eta_weights * hbm), 2.0 * k * n * t / (eta_compute * peak))

    print(f"{cpu_model()}: {THREADS} threads, numpy {np.__version__} ({blas_name()})")
    print(f"other processes used {100 * others:.0f}% of the CPUs during the run")
    if others > 0.1:
        print("WARNING: the machine was busy; rerun when it is idle")
    print("fp32 GEMM GFLOP/s: " + ", ".join(f"{name} {r / 1e9:.0f}" for name, r in gemm_rates.items()))
    print(f"  a Qwen3-0.6B layer at 2048 tokens: {layer_rate / 1e9:.0f}")
    print("bandwidth GB/s: " + ", ".join(f"{name} {v / 1e9:.1f}" for name, v in bw.items()))
    print(
        f"\nx @ W, us per call (model error %); fit on tokens {list(FIT_TOKENS)}: {hbm * eta_weights / 1e9:.1f} GB/s,"
    )
    print(f"intercept {intercept * 1e6:.0f} us (linear_op_overhead_s is it clipped at 0)")
    print(f"{'K x N':>12} {'MB':>6} " + " ".join(f"{f'{t} tok':>16}" for t in TOKENS))
    for k, n in SHAPES:
        cells = []
        for t in TOKENS:
            measured = stream[(k, n, t)]
            cells.append(f"{measured * 1e6:9.0f} ({100 * (model_s(k, n, t) / measured - 1):+4.0f})")
        print(f"{f'{k}x{n}':>12} {F32 * k * n / 1e6:6.1f} " + " ".join(cells))

    profile = {
        "name": "cpu",
        "description": (
            f"{cpu_model()}, {os.cpu_count()} cores, no GPU; measured {datetime.date.today().isoformat()} by "
            f"scripts/measure_cpu_profile.py with numpy {np.__version__} ({blas_name()}), {THREADS} threads, "
            f"other processes using {100 * others:.0f}% of the CPUs meanwhile. The whole host is one device. "
            f"fp32 throughout (no bf16 on this path): peak_flops_bf16 is the best fp32 GEMM (2048-4096 square "
            f"or layer-shaped); "
            f"hbm_bytes_per_s the best of copy/triad on 1 GiB arrays; eta_weights and linear_op_overhead_s "
            f"slope and intercept of the time of y = x @ W against bytes (10 Qwen2.5/Qwen3 layer matrices, "
            f"3-90 MB, W streamed from DRAM) at {FIT_TOKENS[0]}-{FIT_TOKENS[-1]} tokens (numpy's sgemm path; "
            f"1 token takes gemv, {gemv_speedup:.1f}x faster, not modelled), counting the bytes actually moved "
            f"(4 per weight: the cost model charges bf16, 2 per parameter, so an fp32 run streams twice its "
            f"bytes); eta_compute a Qwen3-0.6B layer's GEMMs at 2048 tokens; eta_kv decode attention over "
            f"1 GiB of K/V; eta_prefill a numpy Qwen3-0.6B layer forward at 1024 tokens; t_fix_s/c_seq_s "
            f"intercept/slope over batch of a numpy decode loop (28 tiny layers, temperature sampling over a "
            f"151936 vocabulary). By rule: nvlink and pcie = 2-thread copy bandwidth (host memory), "
            f"inter_node 10 Gb/s Ethernet, sync_bytes_per_s 1-thread copy bandwidth, sync_alpha_s copying a "
            f"28-layer model's 311 tensors of one element, mfu_forward/mfu_train = "
            f"{MFU_FORWARD_OF_ETA}x/{MFU_TRAIN_OF_ETA}x eta_compute."
        ),
        "peak_flops_bf16": peak,
        "hbm_bytes_per_s": hbm,
        "memory_bytes": mem_total_bytes(),
        "t_fix_s": t_fix,
        "c_seq_s": c_seq,
        "eta_weights": eta_weights,
        "eta_kv": eta_kv,
        "eta_compute": eta_compute,
        "eta_prefill": eta_prefill,
        "linear_op_overhead_s": overhead,
        "mfu_forward": MFU_FORWARD_OF_ETA * eta_compute,
        "mfu_train": MFU_TRAIN_OF_ETA * eta_compute,
        "nvlink_bytes_per_s": bw["copy"],
        "inter_node_bytes_per_s": INTER_NODE_BYTES_PER_S,
        "pcie_bytes_per_s": bw["copy"],
        "sync_alpha_s": alpha,
        "sync_bytes_per_s": bw["copy_1thread"],
    }
    profile = {k: float(f"{v:.3g}") if isinstance(v, float) else v for k, v in profile.items()}

    print(f"\n{'key':24} {'value':>10}")
    for key, value in profile.items():
        if key not in ("name", "description"):
            print(f"{key:24} {value:>10.3g}")
    args.out.write_text(json.dumps(profile, indent=2) + "\n")
    print(f"\nwrote {args.out} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
