"""Measure a GPU as a device profile for the cost model (``jigsaw_engine/cost/profiles/<name>.json``).

On a GPU host, in one go of at most 8 minutes (needs torch only: no network, no project install):

    python3 scripts/measure_gpu_profile.py --budget-s 450 --out "$OUT/h200.json"

then copy ``h200.json`` over ``jigsaw_engine/cost/profiles/h200.json`` (the file a cluster spec's
``device_type: h200`` selects) and keep ``h200.json.points.json``, the raw sweep, beside it. Without
``--out`` the profile is written straight into ``jigsaw_engine/cost/profiles/<slug>.json`` (``NVIDIA
H200`` -> ``h200``), replacing the modelled one. ``--budget-s`` caps the measuring (importing torch
before it adds about 10 s); before each sweep point the script estimates its time and skips it, listed
as skipped, if the budget left (less a reserve for the later phases) is too small. Expected on an
H200: about a minute of measuring (``--plan --name h200`` estimates under 30 s, pessimistically, plus
CUDA start-up). Of the 15 decode points, 512 x 8192 (481 GB of KV cache) never fits, and 128 x 8192 and
512 x 2048 (120 GB each) only where ``--kv-mem-fraction`` (0.85) of the free memory holds them; the
points file lists each as measured or skipped, with the reason. ``--plan`` prints every point with its
estimated time from the base profile's numbers and measures nothing (no GPU needed); ``--batches`` and
``--contexts`` change the sweep.

Test on a CPU (a 2-layer model of hidden size 64 in fp32, a few seconds):

    python3 scripts/measure_gpu_profile.py --device cpu --quick --out /tmp/x.json

Imports only the standard library and torch (transformers only to load ``--model-dir`` weights), so it
runs where the project's other dependencies are missing; the JSON is written in the schema
``jigsaw_engine.cost.device.load_device_profile`` reads. The model is a decoder-only, Qwen3-style
network in plain torch (RMSNorm, GQA attention with q/k norm and RoPE, SwiGLU MLP, tied embeddings),
default Qwen3-0.6B-shaped (28 layers, hidden 1024, 16 query / 8 KV heads of 128, MLP 3072, vocabulary
151,936) with random bf16 weights (no download; timings do not depend on the values). ``--model-dir``
takes the architecture from a checkpoint's ``config.json`` (Qwen2/Qwen3/Llama layouts) and, where
transformers is importable, its weights. Decode keeps its own KV cache and attends with
``scaled_dot_product_attention``. GPU times are medians of CUDA-event timings after warm-up; short
kernels are timed inside a CUDA graph so that launch gaps do not count.

How each key is obtained (the formulas are ``jigsaw_engine/cost/cost_model.py``'s; the CPU twin is
``scripts/measure_cpu_profile.py``):

- peak_flops_bf16: best bf16 GEMM, square (4096, 8192) or layer-shaped (below);
- hbm_bytes_per_s: best of a device-to-device copy (2 x bytes) and an add (3 x bytes) on 2 GiB tensors;
- memory_bytes: the device's total memory as torch reports it;
- eta_compute: the model layer's four GEMMs (QKV, output, gate+up, down) at 2048 tokens, against the
  peak (measured round-robin with it);
- eta_weights, linear_op_overhead_s: least squares ``t = overhead + bytes / (eta * bw)`` of ``y = x @ W``
  at 1-16 tokens over 10 Qwen2.5/Qwen3 layer matrices (2-45 MB in bf16), each call on another copy of
  ``W`` from a 1 GiB buffer so that it streams from HBM and not from L2;
- t_fix_s, c_seq_s, eta_kv: the decode sweep (batch 1-512 x context 512-8192, one step with the cache
  pre-filled, CUDA-graph timed as a serving engine runs decode): the cost model's linear-layer time
  (``smooth_max`` of weight streaming and compute, from the fields above) is subtracted from each step,
  and the rest fitted as ``t_fix + c_seq * batch + kv_bytes / (eta_kv * bw)`` (least squares on relative
  error, coefficients >= 0); the fit's error per point is in the points file;
- eta_prefill: a forward over 4 prompts of 512 tokens (logits of the last token only), counted as
  ``2 * params * tokens`` FLOPs like ``prefill_s``;
- mfu_forward: a log-prob forward (full logits, log-softmax, gather) at the largest token count
  measured (2048 or 8192 tokens in sequences of up to 4096), ``2 * params * tokens`` FLOPs plus
  attention's ``4 * layers * hidden * seq_len**2`` per sequence, as the cost model counts them;
- mfu_train: forward and backward of the same (cross-entropy, no optimizer step), three times
  those FLOPs (the cost model adds the Adam step and its framework factor on top);
- pcie_bytes_per_s: pinned host-to-device copy of 512 MiB;
- carried over from the base profile (``--base``, default the existing profile of that name), else a
  documented default, because one GPU cannot show them: nvlink_bytes_per_s, inter_node_bytes_per_s, and
  sync_alpha_s/sync_bytes_per_s (a framework's weight sync, not a device constant; the raw
  device-to-device copy of the model's tensors is in the points file) and stage_overhead_s (the
  runtime's cost of launching a stage, measured by ``jigsaw run``, not here) and reward_s_per_sequence
  (graders run on CPU workers, not on the GPU). A field whose phase failed or was
  skipped is carried over the same way, and the description says so.

Every count of bytes is of bytes actually moved (2 per element in bf16, 4 in fp32), as in the CPU script.
The peak is the best GEMM measured, not the datasheet's (the modelled profiles take the datasheet's and
lower efficiencies): the cost model only ever uses ``eta * peak``, so the two conventions agree in time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

PROFILE_DIR = Path(__file__).resolve().parents[1] / "jigsaw_engine" / "cost" / "profiles"
PROFILE_KEYS = (
    "peak_flops_bf16",
    "hbm_bytes_per_s",
    "memory_bytes",
    "t_fix_s",
    "c_seq_s",
    "eta_weights",
    "eta_kv",
    "eta_compute",
    "eta_prefill",
    "linear_op_overhead_s",
    "mfu_forward",
    "mfu_train",
    "nvlink_bytes_per_s",
    "inter_node_bytes_per_s",
    "pcie_bytes_per_s",
    "sync_alpha_s",
    "sync_bytes_per_s",
    "stage_overhead_s",
    "reward_s_per_sequence",
)
CARRIED_KEYS = (
    "nvlink_bytes_per_s",
    "inter_node_bytes_per_s",
    "sync_alpha_s",
    "sync_bytes_per_s",
    "stage_overhead_s",
    "reward_s_per_sequence",
)
"""Not measurable on one GPU (or not a device constant): always taken from the base profile."""
DEFAULTS: dict[str, float] = {
    # The public-source H100 starting values (docs/cost-model.md, "GPU profiles"): used only where
    # there is no base profile and a phase could not measure its field.
    "peak_flops_bf16": 989e12,
    "hbm_bytes_per_s": 3.35e12,
    "memory_bytes": 80e9,
    "t_fix_s": 2e-3,
    "c_seq_s": 20e-6,
    "eta_weights": 0.7,
    "eta_kv": 0.7,
    "eta_compute": 0.6,
    "eta_prefill": 0.55,
    "linear_op_overhead_s": 0.0,
    "mfu_forward": 0.4,
    "mfu_train": 0.35,
    "nvlink_bytes_per_s": 450e9,
    "inter_node_bytes_per_s": 40e9,
    "pcie_bytes_per_s": 50e9,
    "sync_alpha_s": 1.0,
    "sync_bytes_per_s": 30e9,
    "stage_overhead_s": 0.5,
    "reward_s_per_sequence": 0.002,
}
ROOFLINE_SMOOTHING_P = 2.0  # the cost model's smooth max exponent (cost_model.ROOFLINE_SMOOTHING_P)
ETA_RANGE = (0.01, 1.0)  # an efficiency outside this is a failed fit, clipped and reported
GIB = 2**30


# --- model --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arch:
    """A dense decoder's architecture numbers, as in an HF ``config.json``."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = True
    qk_norm: bool = True
    qkv_bias: bool = False
    rope_theta: float = 1e6
    rms_eps: float = 1e-6

    @property
    def num_params(self) -> int:
        """Counted as ``jigsaw_engine.spec.models.model_from_hf_config`` counts (norms and biases left
        out), so that FLOPs and bytes here mean what they mean in the cost model."""
        attn = 2 * self.hidden * self.heads * self.head_dim + 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (attn + mlp) + self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def kv_elements_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim

    def layer_gemm_shapes(self) -> tuple[tuple[int, int], ...]:
        """(K, N) of the layer's four GEMMs ``y = x @ W``: QKV, output, gate+up, down."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return (
            (self.hidden, q + 2 * kv),
            (q, self.hidden),
            (self.hidden, 2 * self.intermediate),
            (self.intermediate, self.hidden),
        )


QWEN3_0_6B = Arch("qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 151_936)
TINY = Arch("tiny-2x64", 2, 64, 4, 2, 16, 128, 256)


def arch_from_hf_config(name: str, config: dict[str, Any]) -> Arch:
    """Architecture numbers from an HF ``config.json`` (Qwen2, Qwen3, Llama and Mistral layouts)."""
    model_type = str(config.get("model_type", ""))
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    rope = config.get("rope_parameters") or {}  # transformers 5 moved rope_theta in here
    theta = config.get("rope_theta") or rope.get("rope_theta") or 10_000.0
    if config.get("rope_scaling") or rope.get("rope_type", "default") != "default":
        log("note: the checkpoint scales RoPE; plain RoPE is used (timings are unaffected)")
    return Arch(
        name=name,
        layers=int(config["num_hidden_layers"]),
        hidden=hidden,
        heads=heads,
        kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        intermediate=int(config["intermediate_size"]),
        vocab=int(config["vocab_size"]),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        qk_norm=model_type.startswith("qwen3"),
        qkv_bias=bool(config.get("attention_bias", model_type == "qwen2")),
        rope_theta=float(theta),
        rms_eps=float(config.get("rms_norm_eps", 1e-6)),
    )


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in fp32, cast back before the scale (as HF's Qwen/Llama norms do)."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE in HF's half-split convention; ``cos``/``sin`` broadcast over batch and heads."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal SDPA with K/V repeated to the query heads: a copy of a few MB per layer, but it keeps
    every backend (flash attention above all, forward and backward) available whatever this torch
    version's support for grouped K/V, so that prefill and training are timed on the fast path."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


Cache = list[tuple[torch.Tensor, torch.Tensor]]
"""Per layer, K and V of shape (batch, kv_heads, context, head_dim)."""


class Layer(torch.nn.Module):
    def __init__(self, arch: Arch, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        a = arch

        def weight(*shape: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.randn(*shape, device=device, dtype=dtype) * 0.02)

        def ones(n: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.ones(n, device=device, dtype=dtype))

        qkv = (a.heads + 2 * a.kv_heads) * a.head_dim
        self.wqkv = weight(qkv, a.hidden)  # (out, in), as torch.nn.Linear and HF store them
        self.bqkv = torch.nn.Parameter(torch.zeros(qkv, device=device, dtype=dtype)) if a.qkv_bias else None
        self.wo = weight(a.hidden, a.heads * a.head_dim)
        self.w_gate_up = weight(2 * a.intermediate, a.hidden)
        self.w_down = weight(a.hidden, a.intermediate)
        self.ln_attn, self.ln_mlp = ones(a.hidden), ones(a.hidden)
        self.q_norm, self.k_norm = ones(a.head_dim), ones(a.head_dim)


class Decoder(torch.nn.Module):
    """A Qwen3-style decoder in plain torch, with a KV-cache decode step."""

    def __init__(self, arch: Arch, device: torch.device, dtype: torch.dtype, max_positions: int) -> None:
        super().__init__()
        self.arch = arch
        self.embed = torch.nn.Parameter(torch.randn(arch.vocab, arch.hidden, device=device, dtype=dtype) * 0.02)
        self.layers = torch.nn.ModuleList(Layer(arch, device, dtype) for _ in range(arch.layers))
        self.norm = torch.nn.Parameter(torch.ones(arch.hidden, device=device, dtype=dtype))
        self.head = (
            None
            if arch.tied_embeddings
            else torch.nn.Parameter(torch.randn(arch.vocab, arch.hidden, device=device, dtype=dtype) * 0.02)
        )
        inv_freq = 1.0 / arch.rope_theta ** (torch.arange(0, arch.head_dim, 2, dtype=torch.float32) / arch.head_dim)
        angles = torch.arange(max_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1).to(device)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)

    def _qkv(
        self, layer: Layer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(batch, heads, tokens, head_dim) Q, K, V of ``x`` (batch, tokens, hidden), rotated."""
        a = self.arch
        b, t, _ = x.shape
        q, k, v = F.linear(x, layer.wqkv, layer.bqkv).split(
            (a.heads * a.head_dim, a.kv_heads * a.head_dim, a.kv_heads * a.head_dim), dim=-1
        )
        q, k, v = q.view(b, t, a.heads, a.head_dim), k.view(b, t, a.kv_heads, a.head_dim), v.view(b, t, -1, a.head_dim)
        if a.qk_norm:
            q, k = rms_norm(q, layer.q_norm, a.rms_eps), rms_norm(k, layer.k_norm, a.rms_eps)
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
        return rotate(q, cos, sin).transpose(1, 2), rotate(k, cos, sin).transpose(1, 2), v.transpose(1, 2)

    def _layer(
        self,
        layer: Layer,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        a = self.arch
        q, k, v = self._qkv(layer, rms_norm(h, layer.ln_attn, a.rms_eps), cos, sin)
        h = h + F.linear(attend(q, k, v), layer.wo)
        gate, up = F.linear(rms_norm(h, layer.ln_mlp, a.rms_eps), layer.w_gate_up).chunk(2, dim=-1)
        return h + F.linear(F.silu(gate) * up, layer.w_down)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(rms_norm(h, self.norm, self.arch.rms_eps), self.embed if self.head is None else self.head)

    def forward(self, ids: torch.Tensor, cache: Cache | None = None, last_only: bool = False) -> torch.Tensor:
        """Causal forward over ``ids`` (batch, tokens) from position 0: logits of every token (or of
        the last), K/V written to ``cache`` when given (a prefill)."""
        b, t = ids.shape
        cos, sin = self.cos[:t], self.sin[:t]
        h = F.embedding(ids, self.embed)
        for i, layer in enumerate(self.layers):

            def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i: int = i) -> torch.Tensor:
                if cache is not None:
                    cache[i][0][:, :, :t].copy_(k)
                    cache[i][1][:, :, :t].copy_(v)
                o = causal_attention(q, k, v)
                return o.transpose(1, 2).reshape(b, t, -1)

            h = self._layer(layer, h, cos, sin, attend)
        return self.logits(h[:, -1:] if last_only else h)

    def decode(self, ids: torch.Tensor, cache: Cache, pos: int) -> torch.Tensor:
        """One decode step: ``ids`` (batch,) at position ``pos`` of every sequence; K/V appended at
        ``pos``, attention over positions 0..pos. Returns logits (batch, vocab).

        Grouped heads attend as one query block per KV head, (batch, kv_heads, group, head_dim), so
        that the cache is read once, by any SDPA backend, without repeating it."""
        a = self.arch
        b, group = ids.shape[0], a.heads // a.kv_heads
        cos, sin = self.cos[pos : pos + 1], self.sin[pos : pos + 1]
        h = F.embedding(ids[:, None], self.embed)
        for i, layer in enumerate(self.layers):

            def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i: int = i) -> torch.Tensor:
                k_cache, v_cache = cache[i]
                k_cache[:, :, pos : pos + 1].copy_(k)
                v_cache[:, :, pos : pos + 1].copy_(v)
                o = F.scaled_dot_product_attention(
                    q.reshape(b, a.kv_heads, group, a.head_dim), k_cache[:, :, : pos + 1], v_cache[:, :, : pos + 1]
                )
                return o.reshape(b, 1, a.heads * a.head_dim)

            h = self._layer(layer, h, cos, sin, attend)
        return self.logits(h)[:, 0]


def sample(logits: torch.Tensor) -> torch.Tensor:
    """Temperature-1 sampling by the Gumbel-max trick: batched, and safe to capture in a CUDA graph."""
    u = torch.rand(logits.shape, device=logits.device, dtype=torch.float32).clamp_(1e-20, 1.0 - 1e-7)
    return (logits.float() - torch.log(-torch.log(u))).argmax(dim=-1)


def load_hf_weights(model: Decoder, model_dir: Path) -> bool:
    """Copy a checkpoint's weights into ``model`` (HF Qwen2/Qwen3/Llama names) with transformers;
    False, weights left random, where transformers is not importable. Timings do not depend on the
    values: this is for runs that also want to look at the model's output."""
    try:
        import transformers
    except ImportError:
        log("transformers is not importable: random weights (the timings do not depend on them)")
        return False
    major = int(transformers.__version__.split(".")[0])
    dtype_kw = "dtype" if major >= 5 else "torch_dtype"
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), **{dtype_kw: model.embed.dtype})
    state = {k: v.detach() for k, v in hf.state_dict().items()}

    def put(param: torch.Tensor | None, *keys: str) -> None:
        if param is None:
            return
        value = torch.cat([state[k] for k in keys]) if len(keys) > 1 else state[keys[0]]
        if tuple(value.shape) != tuple(param.shape):
            raise ValueError(f"{keys}: checkpoint shape {tuple(value.shape)}, model shape {tuple(param.shape)}")
        param.copy_(value)

    with torch.no_grad():
        put(model.embed, "model.embed_tokens.weight")
        put(model.norm, "model.norm.weight")
        put(model.head, "lm_head.weight")
        for i, layer in enumerate(model.layers):
            p = f"model.layers.{i}."
            put(layer.wqkv, *(f"{p}self_attn.{n}_proj.weight" for n in "qkv"))
            put(layer.bqkv, *(f"{p}self_attn.{n}_proj.bias" for n in "qkv"))
            put(layer.wo, f"{p}self_attn.o_proj.weight")
            put(layer.w_gate_up, f"{p}mlp.gate_proj.weight", f"{p}mlp.up_proj.weight")
            put(layer.w_down, f"{p}mlp.down_proj.weight")
            put(layer.ln_attn, f"{p}input_layernorm.weight")
            put(layer.ln_mlp, f"{p}post_attention_layernorm.weight")
            if model.arch.qk_norm:
                put(layer.q_norm, f"{p}self_attn.q_norm.weight")
                put(layer.k_norm, f"{p}self_attn.k_norm.weight")
    return True


# --- timing and budget --------------------------------------------------------------------------


class Budget:
    """Wall-clock allowance of the whole measurement, counted from construction."""

    def __init__(self, total_s: float) -> None:
        self.total_s, self.start = total_s, time.perf_counter()

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.start

    def left_s(self) -> float:
        return self.total_s - self.elapsed_s()


BUDGET = Budget(480.0)


def log(message: str) -> None:
    """Progress on stderr, prefixed by the budget spent, so a slot's operator can watch the clock."""
    print(f"[{BUDGET.elapsed_s():6.1f}/{BUDGET.total_s:.0f} s] {message}", file=sys.stderr, flush=True)


class Clock:
    """Times callables as the device sees them: CUDA events on a GPU, perf_counter on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.cuda = device, device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def samples_s(self, fn: Callable[[], object], *, repeats: int, warmup: int = 1) -> list[float]:
        """Seconds of each of ``repeats`` calls after ``warmup`` untimed ones."""
        for _ in range(warmup):
            fn()
        self.sync()
        if self.cuda:
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)
            ]
            for start, end in events:
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize(self.device)
            return [start.elapsed_time(end) / 1e3 for start, end in events]
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return times

    def graph_samples_s(self, fn: Callable[[], object], *, repeats: int, warmup: int = 2) -> list[float] | None:
        """Like :meth:`samples_s` for ``fn`` captured once in a CUDA graph and replayed: the GPU's
        own time, without the host's launch gaps (as serving engines run decode). None on a CPU or
        where capture fails."""
        if not self.cuda:
            return None
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(warmup):
                    fn()
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
        except RuntimeError as exc:
            log(f"CUDA graph capture failed, timing eagerly: {str(exc).splitlines()[0][:200]}")
            torch.cuda.synchronize(self.device)
            return None
        try:
            return self.samples_s(graph.replay, repeats=repeats, warmup=1)
        finally:
            del graph

    def per_call_s(self, fn: Callable[[], object], *, calls: int, repeats: int) -> tuple[float, str]:
        """Median seconds of one call of ``fn`` over ``calls`` back-to-back calls, graph-captured
        where possible; and how it was timed ("graph" or "eager")."""

        def many() -> None:
            for _ in range(calls):
                fn()

        samples = self.graph_samples_s(many, repeats=repeats)
        if samples is not None:
            return statistics.median(samples) / calls, "graph"
        return statistics.median(self.samples_s(many, repeats=repeats)) / calls, "eager"


def free_cache(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


# --- plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Sizes of every phase; :data:`FULL` on a GPU, :data:`QUICK` to test the script on a CPU."""

    arch: Arch
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    square_sizes: tuple[int, ...]
    layer_tokens: int
    stream_shapes: tuple[tuple[int, int], ...]
    stream_tokens: tuple[int, ...]
    stream_buffer_bytes: int
    bandwidth_bytes: int
    prefill_prompts: int
    prefill_tokens: int
    train_tokens: tuple[int, ...]
    train_seq_len: int
    pcie_bytes: int
    repeats: int


FULL = Plan(
    arch=QWEN3_0_6B,
    batches=(1, 8, 32, 128, 512),
    contexts=(512, 2048, 8192),
    square_sizes=(4096, 8192),
    layer_tokens=2048,
    # (K, N) of y = x @ W: Qwen2.5-0.5B, Qwen3-0.6B, Qwen2.5-1.5B and Qwen2.5-3B linear layers
    stream_shapes=(
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
    ),
    stream_tokens=(1, 4, 16),
    stream_buffer_bytes=GIB,
    bandwidth_bytes=2 * GIB,
    prefill_prompts=4,
    prefill_tokens=512,
    train_tokens=(2048, 8192),
    train_seq_len=4096,
    pcie_bytes=GIB // 2,
    repeats=10,
)
QUICK = Plan(
    arch=TINY,
    batches=(1, 4),
    contexts=(32, 64),
    square_sizes=(128, 256),
    layer_tokens=64,
    stream_shapes=((64, 64), (64, 256), (256, 64), (128, 128)),
    stream_tokens=(1, 4),
    stream_buffer_bytes=2**18,
    bandwidth_bytes=8 * 2**20,
    prefill_prompts=2,
    prefill_tokens=32,
    train_tokens=(64, 128),
    train_seq_len=64,
    pcie_bytes=4 * 2**20,
    repeats=3,
)
CAPTURE_S = 0.3  # allowance for one CUDA graph capture (and its warm-up) of a decode step
LAUNCH_S = 8e-6  # host time of one eager kernel launch in torch
KERNELS_PER_LAYER = 60  # eager decode kernels per layer: 4 RMSNorms of ~8 each, RoPE, 4 GEMMs, cache writes, SDPA, MLP


def decode_step_estimate_s(plan: Plan, batch: int, context: int, elem_bytes: int, hbm: float, peak: float) -> float:
    """A pessimistic guess of one eager decode step: the larger of the host's launches and the
    GPU's work at half of the bandwidth and a third of the peak. Used only to budget the sweep."""
    a = plan.arch
    launches_s = a.layers * KERNELS_PER_LAYER * LAUNCH_S + 1e-3
    gpu_s = (a.num_params + batch * context * a.kv_elements_per_token) * elem_bytes / (0.5 * hbm)
    gpu_s += 2.0 * a.num_params * batch / (peak / 3.0)
    return max(launches_s, gpu_s)


def decode_point_estimate_s(plan: Plan, batch: int, context: int, elem_bytes: int, hbm: float, peak: float) -> float:
    """Eager (1 + warm-up 2 + repeats) and graph (warm-up 2, capture, warm-up 1, repeats) steps."""
    step_s = decode_step_estimate_s(plan, batch, context, elem_bytes, hbm, peak)
    return (3 + plan.repeats) * step_s + (4 + plan.repeats) * step_s + CAPTURE_S


def model_phase_estimate_s(plan: Plan, peak: float) -> float:
    """Prefill, log-prob forward and training at every token count, at a quarter of the peak, with
    a warm-up and up to 5 timed runs each, plus a second of set-up."""
    n = plan.arch.num_params
    flops = 2.0 * n * plan.prefill_prompts * plan.prefill_tokens
    flops += sum((2.0 + 6.0) * n * t for t in plan.train_tokens)
    return 6 * flops / (peak / 4.0) + 1.0


def decode_points(plan: Plan) -> list[tuple[int, int]]:
    """(batch, context) in order of KV size, so that a short budget drops the costliest points."""
    return sorted(((b, c) for b in plan.batches for c in plan.contexts), key=lambda p: (p[0] * p[1], p[0]))


# --- measurements -------------------------------------------------------------------------------


def measure_gemms(clock: Clock, plan: Plan, device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """Best FLOP/s of square GEMMs and of the model layer's four GEMMs at ``plan.layer_tokens``
    tokens, measured round-robin (3 rounds, best of each) so that the ratio compares like with like."""
    t = plan.layer_tokens
    cases: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for n in plan.square_sizes:
        cases[f"{n}^3"] = (torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype))
    for k, n in plan.arch.layer_gemm_shapes():
        cases[f"{t}x{k}x{n}"] = (
            torch.randn(t, k, device=device, dtype=dtype),
            torch.randn(k, n, device=device, dtype=dtype),
        )
    best = dict.fromkeys(cases, math.inf)
    for _ in range(3):
        for name, (x, w) in cases.items():
            seconds, _mode = clock.per_call_s(lambda x=x, w=w: torch.matmul(x, w), calls=10, repeats=3)
            best[name] = min(best[name], seconds)
    rates = {name: 2.0 * x.shape[0] * x.shape[1] * w.shape[1] / best[name] for name, (x, w) in cases.items()}
    layer_flops = sum(2.0 * t * k * n for k, n in plan.arch.layer_gemm_shapes())
    layer_s = sum(best[f"{t}x{k}x{n}"] for k, n in plan.arch.layer_gemm_shapes())
    return {"flops_per_s": rates, "layer_flops_per_s": layer_flops / layer_s, "layer_tokens": t}


def measure_bandwidth(clock: Clock, plan: Plan, device: torch.device) -> dict[str, float]:
    """Bytes read and written per second: a copy (2 x bytes) and an add (3 x bytes)."""
    n = plan.bandwidth_bytes // 4
    a = torch.full((n,), 0.01, device=device)
    b, c = torch.full((n,), 0.02, device=device), torch.empty(n, device=device)
    copy_s, _ = clock.per_call_s(lambda: c.copy_(a), calls=4, repeats=5)
    add_s, _ = clock.per_call_s(lambda: torch.add(a, b, out=c), calls=4, repeats=5)
    nbytes = 4 * n
    return {"copy_bytes_per_s": 2 * nbytes / copy_s, "add_bytes_per_s": 3 * nbytes / add_s, "array_bytes": nbytes}


def measure_weight_streaming(
    clock: Clock, plan: Plan, device: torch.device, dtype: torch.dtype
) -> list[dict[str, float]]:
    """Seconds per ``x @ W`` for each (K, N, tokens), each call on another copy of ``W`` from a
    buffer several times the last-level cache, so that every call streams its matrix from memory."""
    elem = torch.tensor([], dtype=dtype).element_size()
    buf = torch.randn(plan.stream_buffer_bytes // elem, device=device, dtype=dtype)
    points = []
    for k, n in plan.stream_shapes:
        copies = max(2, min(256, buf.numel() // (k * n)))
        views = [buf[(i % (buf.numel() // (k * n))) * k * n :][: k * n].view(k, n) for i in range(copies)]
        for tokens in plan.stream_tokens:
            x = torch.randn(tokens, k, device=device, dtype=dtype)
            seconds, mode = clock.per_call_s(
                lambda x=x, views=views: [torch.matmul(x, w) for w in views], calls=1, repeats=5
            )
            points.append(
                {"k": k, "n": n, "tokens": tokens, "bytes": elem * k * n, "seconds": seconds / copies, "timing": mode}
            )
    del buf
    free_cache(device)
    return points


def allocate_kv(
    arch: Arch, points: list[tuple[int, int]], device: torch.device, dtype: torch.dtype, fraction: float
) -> tuple[torch.Tensor | None, list[tuple[int, int]], list[tuple[int, int]]]:
    """One buffer for the largest decode point whose cache fits in ``fraction`` of the free memory
    (less room for activations and graph pools); the points it holds and those it does not."""
    elem = torch.tensor([], dtype=dtype).element_size()
    free_cache(device)  # memory the caching allocator holds but no tensor uses counts as free here
    free_bytes = float(torch.cuda.mem_get_info(device)[0]) if device.type == "cuda" else available_host_bytes()
    reserve_bytes = 2 * GIB + 16.0 * max(b for b, _ in points) * arch.vocab
    room = fraction * free_bytes - reserve_bytes
    fits = [p for p in points if p[0] * p[1] * arch.kv_elements_per_token * elem <= room]
    while fits:
        elements = max(b * c for b, c in fits) * arch.kv_elements_per_token
        try:
            buf = torch.empty(elements, device=device, dtype=dtype).uniform_(-1.0, 1.0)
            return buf, fits, [p for p in points if p not in fits]
        except torch.cuda.OutOfMemoryError:
            largest = max(b * c for b, c in fits)
            fits = [p for p in fits if p[0] * p[1] < largest]
            free_cache(device)
    return None, [], points


def cache_views(buf: torch.Tensor, arch: Arch, batch: int, context: int) -> Cache:
    """Per-layer K/V views of shape (batch, kv_heads, context, head_dim) from the front of ``buf``."""
    n = batch * arch.kv_heads * context * arch.head_dim
    shape = (batch, arch.kv_heads, context, arch.head_dim)
    return [(buf[2 * i * n :][:n].view(shape), buf[(2 * i + 1) * n :][:n].view(shape)) for i in range(arch.layers)]


def measure_decode_sweep(
    clock: Clock,
    plan: Plan,
    model: Decoder,
    device: torch.device,
    dtype: torch.dtype,
    *,
    hbm: float,
    peak: float,
    kv_fraction: float,
    reserve_s: float,
) -> list[dict[str, Any]]:
    """One decode step (forward, then sampling) per (batch, context), the cache pre-filled with
    random values and the new token at position ``context - 1``: eager and CUDA-graph timed."""
    arch, elem = plan.arch, torch.tensor([], dtype=dtype).element_size()
    points = decode_points(plan)
    buf, fits, too_big = allocate_kv(arch, points, device, dtype, kv_fraction)
    records: list[dict[str, Any]] = []
    for batch, context in too_big:
        kv_gb = batch * context * arch.kv_elements_per_token * elem / 1e9
        log(f"decode batch {batch} x context {context}: skipped, its {kv_gb:.0f} GB of KV cache does not fit")
        records.append({"batch": batch, "context": context, "status": "skipped", "reason": "KV cache does not fit"})
    for batch, context in fits:
        record: dict[str, Any] = {"batch": batch, "context": context}
        record["kv_bytes"] = batch * context * arch.kv_elements_per_token * elem
        estimate_s = decode_point_estimate_s(plan, batch, context, elem, hbm, peak)
        if BUDGET.left_s() - reserve_s < estimate_s:
            log(f"decode batch {batch} x context {context}: skipped, needs ~{estimate_s:.1f} s of the budget")
            records.append(record | {"status": "skipped", "reason": "budget"})
            continue
        assert buf is not None
        cache = cache_views(buf, arch, batch, context)
        ids = torch.randint(arch.vocab, (batch,), device=device)
        with torch.no_grad():

            def step(cache: Cache = cache, ids: torch.Tensor = ids, pos: int = context - 1) -> torch.Tensor:
                return sample(model.decode(ids, cache, pos))

            try:
                first_s = clock.samples_s(step, repeats=1, warmup=1)[0]
                # up to 2 s of eager steps a point: the slow points get fewer repeats
                repeats = max(3, min(plan.repeats, int(2.0 / max(first_s, 1e-9))))
                eager = clock.samples_s(step, repeats=repeats, warmup=1)
                graph = clock.graph_samples_s(step, repeats=repeats)
            except torch.cuda.OutOfMemoryError:
                log(f"decode batch {batch} x context {context}: out of memory, skipped")
                records.append(record | {"status": "skipped", "reason": "out of memory"})
                free_cache(device)
                continue
        record |= {
            "status": "measured",
            "repeats": repeats,
            "eager_s": statistics.median(eager),
            "graph_s": statistics.median(graph) if graph else None,
        }
        record["seconds"] = record["graph_s"] or record["eager_s"]
        record["timing"] = "graph" if graph else "eager"
        graph_ms = f"{1e3 * record['graph_s']:.3f} ms" if graph else "-"
        log(f"decode batch {batch} x context {context}: eager {1e3 * record['eager_s']:.3f} ms, graph {graph_ms}")
        records.append(record)
        free_cache(device)
    if buf is not None and fits:
        records.append(measure_kv_read(clock, buf, arch, max(fits, key=lambda p: p[0] * p[1])))
    del buf
    free_cache(device)
    return records


def measure_kv_read(clock: Clock, buf: torch.Tensor, arch: Arch, point: tuple[int, int]) -> dict[str, Any]:
    """Decode attention alone (one layer's SDPA of one new token per sequence) over the largest
    cache of the sweep: a check on the fitted eta_kv, and its fallback."""
    batch, context = point
    k_cache, v_cache = cache_views(buf, arch, batch, context)[0]
    group = arch.heads // arch.kv_heads
    q = torch.randn(batch, arch.kv_heads, group, arch.head_dim, device=buf.device, dtype=buf.dtype)
    with torch.no_grad():
        seconds, mode = clock.per_call_s(
            lambda: F.scaled_dot_product_attention(q, k_cache, v_cache), calls=arch.layers, repeats=5
        )
    nbytes = 2 * k_cache.numel() * k_cache.element_size()
    return {"kind": "kv_read", "batch": batch, "context": context, "bytes": nbytes, "seconds": seconds, "timing": mode}


def measure_model_phase(
    clock: Clock, plan: Plan, model: Decoder, device: torch.device, peak: float
) -> list[dict[str, Any]]:
    """Prefill, log-prob forward and forward+backward, timed eagerly (as training frameworks run)."""
    arch, n_params, records = plan.arch, plan.arch.num_params, []
    free_cache(device)  # hand the decode sweep's KV cache back before the big activations

    def run(kind: str, tokens: int, seqs: int, fn: Callable[[], object], flops: float) -> None:
        estimate_s = 6 * flops / (peak / 4.0)
        if BUDGET.left_s() - 5.0 < estimate_s:
            log(f"{kind} at {tokens} tokens: skipped, needs ~{estimate_s:.1f} s of the budget")
            records.append({"kind": kind, "tokens": tokens, "status": "skipped", "reason": "budget"})
            return
        try:
            first_s = clock.samples_s(fn, repeats=1, warmup=1)[0]
            repeats = max(2, min(5, int(3.0 / max(first_s, 1e-9))))
            seconds = statistics.median(clock.samples_s(fn, repeats=repeats, warmup=0))
        except torch.cuda.OutOfMemoryError:
            log(f"{kind} at {tokens} tokens: out of memory, skipped")
            records.append({"kind": kind, "tokens": tokens, "status": "skipped", "reason": "out of memory"})
            model.zero_grad(set_to_none=True)
            free_cache(device)
            return
        rate = flops / seconds
        log(f"{kind} at {tokens} tokens ({seqs} x {tokens // seqs}): {1e3 * seconds:.2f} ms, {rate / peak:.3f} of peak")
        records.append(
            {"kind": kind, "tokens": tokens, "sequences": seqs, "seconds": seconds, "flops": flops}
            | {"fraction_of_peak": rate / peak, "status": "measured", "repeats": repeats}
        )

    prompts = torch.randint(arch.vocab, (plan.prefill_prompts, plan.prefill_tokens), device=device)

    def prefill() -> None:
        with torch.no_grad():
            model(prompts, last_only=True)

    tokens = plan.prefill_prompts * plan.prefill_tokens
    run("prefill", tokens, plan.prefill_prompts, prefill, 2.0 * n_params * tokens)

    for tokens in plan.train_tokens:
        seq_len = min(tokens, plan.train_seq_len)
        ids = torch.randint(arch.vocab, (tokens // seq_len, seq_len), device=device)
        targets = torch.randint(arch.vocab, ids.shape, device=device)

        def logprob(ids: torch.Tensor = ids, targets: torch.Tensor = targets) -> None:
            with torch.no_grad():
                logp = torch.log_softmax(model(ids).float(), dim=-1)
                logp.gather(-1, targets[..., None])

        def train(ids: torch.Tensor = ids, targets: torch.Tensor = targets) -> None:
            loss = F.cross_entropy(model(ids).float().flatten(0, 1), targets.flatten())
            loss.backward()
            model.zero_grad(set_to_none=True)

        # Attention as the cost model counts it (cost_model.attention_flops): 4 x layers x hidden
        # per pair of tokens in a sequence, three times that for training.
        attention = 4.0 * arch.layers * arch.hidden * ids.shape[0] * seq_len**2
        run("logprob_forward", tokens, ids.shape[0], logprob, 2.0 * n_params * tokens + attention)
        run("train_forward_backward", tokens, ids.shape[0], train, 6.0 * n_params * tokens + 3.0 * attention)
        free_cache(device)
    return records


def measure_host_copy(clock: Clock, plan: Plan, device: torch.device) -> dict[str, float]:
    """Pinned host-to-device and device-to-host copy bandwidth (PCIe or its successor)."""
    n = plan.pcie_bytes // 4
    host = torch.empty(n, pin_memory=True)
    dev = torch.empty(n, device=device)
    h2d = statistics.median(clock.samples_s(lambda: dev.copy_(host, non_blocking=True), repeats=5))
    d2h = statistics.median(clock.samples_s(lambda: host.copy_(dev, non_blocking=True), repeats=5))
    return {"h2d_bytes_per_s": 4 * n / h2d, "d2h_bytes_per_s": 4 * n / d2h, "bytes": 4 * n}


def measure_weight_copy(clock: Clock, model: Decoder) -> dict[str, float]:
    """An in-device copy of every weight tensor (a colocated weight sync with no framework around
    it), and of as many one-element tensors (its fixed cost). For the points file only."""
    params = [p.detach() for p in model.parameters()]
    copies = [torch.empty_like(p) for p in params]
    ones = [torch.ones(1, device=p.device, dtype=p.dtype) for p in params]
    one_copies = [torch.empty_like(p) for p in ones]

    def copy_all(dst: list[torch.Tensor], src: list[torch.Tensor]) -> None:
        for d, s in zip(dst, src, strict=True):
            d.copy_(s)

    full_s = statistics.median(clock.samples_s(lambda: copy_all(copies, params), repeats=5))
    tiny_s = statistics.median(clock.samples_s(lambda: copy_all(one_copies, ones), repeats=5))
    nbytes = sum(p.numel() * p.element_size() for p in params)
    return {"tensors": len(params), "bytes": nbytes, "copy_bytes_per_s": nbytes / full_s, "alpha_s": tiny_s}


# --- fits ---------------------------------------------------------------------------------------


def smooth_max(a: float, b: float) -> float:
    p = ROOFLINE_SMOOTHING_P
    return float((a**p + b**p) ** (1.0 / p))


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares intercept and slope of ``ys`` against ``xs``."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx > 0 else 0.0
    return my - slope * mx, slope


def fit_nonnegative(rows: list[list[float]], ys: list[float], scales: list[float]) -> list[float]:
    """Coefficients >= 0 minimising ``sum(((row . c - y) / scale)**2)`` (the error relative to each
    point's ``scale``, so that short steps count as much as long ones): the best unconstrained
    least-squares fit over every subset of the columns that comes out non-negative (few columns,
    so trying them all is cheap and exact)."""
    cols = len(rows[0])
    s = torch.tensor(scales, dtype=torch.float64)[:, None]
    a = torch.tensor(rows, dtype=torch.float64) / s
    target = torch.tensor(ys, dtype=torch.float64)[:, None] / s
    best: tuple[float, list[float]] = (math.inf, [0.0] * cols)
    for mask in range(1, 2**cols):
        chosen = [j for j in range(cols) if mask >> j & 1]
        if len(chosen) > len(ys):
            continue
        coef = torch.linalg.lstsq(a[:, chosen], target).solution[:, 0]
        if (coef < 0).any():
            continue
        error = float(((a[:, chosen] @ coef[:, None]) - target).pow(2).sum())
        if error < best[0]:
            full = [0.0] * cols
            for j, c in zip(chosen, coef.tolist(), strict=True):
                full[j] = c
            best = (error, full)
    return best[1]


def clip_eta(value: float, key: str, notes: list[str]) -> float:
    lo, hi = ETA_RANGE
    if not lo <= value <= hi:
        notes.append(f"{key} {value:.3g} clipped to [{lo}, {hi}]")
    return min(hi, max(lo, value))


def derive_profile(
    measured: dict[str, Any], plan: Plan, elem_bytes: int, base: dict[str, float], notes: list[str]
) -> tuple[dict[str, float], list[str]]:
    """The profile's numbers from the measurements, with the keys that could not be measured taken
    from ``base``; returns them and the list of keys so carried."""
    out: dict[str, float] = {}
    gemm = measured.get("gemm")
    if gemm:
        out["peak_flops_bf16"] = max(gemm["flops_per_s"].values())
        out["eta_compute"] = clip_eta(gemm["layer_flops_per_s"] / out["peak_flops_bf16"], "eta_compute", notes)
    bw = measured.get("bandwidth")
    if bw:
        out["hbm_bytes_per_s"] = max(bw["copy_bytes_per_s"], bw["add_bytes_per_s"])
    if measured.get("memory_bytes"):
        out["memory_bytes"] = measured["memory_bytes"]
    peak = out.get("peak_flops_bf16", base["peak_flops_bf16"])
    hbm = out.get("hbm_bytes_per_s", base["hbm_bytes_per_s"])
    eta_c = out.get("eta_compute", base["eta_compute"])

    stream = [p for p in measured.get("weight_streaming", []) if p.get("seconds")]
    if len({p["bytes"] for p in stream}) >= 2:
        intercept, slope = fit_line([p["bytes"] for p in stream], [p["seconds"] for p in stream])
        if slope > 0:
            out["eta_weights"] = clip_eta(1.0 / (slope * hbm), "eta_weights", notes)
            out["linear_op_overhead_s"] = max(intercept, 0.0)
        else:
            notes.append("weight streaming time did not grow with bytes: eta_weights from the mean rate")
            rate = statistics.fmean(p["bytes"] / p["seconds"] for p in stream)
            out["eta_weights"] = clip_eta(rate / hbm, "eta_weights", notes)
            out["linear_op_overhead_s"] = 0.0
    eta_w = out.get("eta_weights", base["eta_weights"])

    a = plan.arch
    decode = [p for p in measured.get("decode", []) if p.get("status") == "measured"]
    kv_check = next((p for p in measured.get("decode", []) if p.get("kind") == "kv_read"), None)
    if decode:
        weights_s = a.num_params * elem_bytes / (eta_w * hbm)
        rows, ys = [], []
        for p in decode:
            linear_s = smooth_max(weights_s, 2.0 * a.num_params * p["batch"] / (eta_c * peak))
            p["linear_model_s"] = linear_s
            rows.append([1.0, float(p["batch"]), float(p["kv_bytes"])])
            ys.append(p["seconds"])
        # fit the whole step on [1, B, kv_bytes] after taking the (known) linear time off both sides
        residual = [y - p["linear_model_s"] for y, p in zip(ys, decode, strict=True)]
        if min(residual) <= 0:
            notes.append("some decode steps were faster than the modelled linear layers alone")
        t_fix, c_seq, s_per_kv_byte = fit_nonnegative(rows, residual, ys)
        out["t_fix_s"], out["c_seq_s"] = t_fix, c_seq
        if s_per_kv_byte > 0:
            out["eta_kv"] = clip_eta(1.0 / (s_per_kv_byte * hbm), "eta_kv", notes)
        elif kv_check:
            notes.append("the decode fit gave KV reads no cost: eta_kv from attention alone")
            out["eta_kv"] = clip_eta(kv_check["bytes"] / (kv_check["seconds"] * hbm), "eta_kv", notes)
    if kv_check:
        kv_check["eta_kv"] = kv_check["bytes"] / (kv_check["seconds"] * hbm)

    by_kind: dict[str, list[dict[str, Any]]] = {}
    for p in measured.get("model", []):
        if p.get("status") == "measured":
            by_kind.setdefault(p["kind"], []).append(p)
    for kind, key in (
        ("prefill", "eta_prefill"),
        ("logprob_forward", "mfu_forward"),
        ("train_forward_backward", "mfu_train"),
    ):
        if by_kind.get(kind):
            largest = max(by_kind[kind], key=lambda p: p["tokens"])
            out[key] = clip_eta(largest["flops"] / (largest["seconds"] * peak), key, notes)

    host = measured.get("host_copy")
    if host:
        out["pcie_bytes_per_s"] = host["h2d_bytes_per_s"]

    profile = {}
    carried = []
    for key in PROFILE_KEYS:
        if key in out and key not in CARRIED_KEYS:
            profile[key] = out[key]
        else:
            profile[key] = base[key]
            carried.append(key)
    return profile, carried


def check_decode_fit(measured: dict[str, Any], profile: dict[str, float], plan: Plan, elem_bytes: int) -> None:
    """Store, per decode point, the step time the fitted fields predict by the cost model's
    formula (with the bytes actually moved) and its error, so the points file shows the fit."""
    a, d = plan.arch, profile
    for p in measured.get("decode", []):
        if p.get("status") != "measured":
            continue
        weights_s = a.num_params * elem_bytes / (d["eta_weights"] * d["hbm_bytes_per_s"])
        compute_s = 2.0 * a.num_params * p["batch"] / (d["eta_compute"] * d["peak_flops_bf16"])
        kv_s = p["kv_bytes"] / (d["eta_kv"] * d["hbm_bytes_per_s"])
        predicted = d["t_fix_s"] + d["c_seq_s"] * p["batch"] + smooth_max(weights_s, compute_s) + kv_s
        p["predicted_s"] = predicted
        p["error_pct"] = 100.0 * (predicted / p["seconds"] - 1.0)


# --- device, base profile, output ---------------------------------------------------------------


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def slug_device(name: str, device: torch.device) -> str:
    """A profile name from a device name: the model number where there is one (``NVIDIA H200`` ->
    ``h200``, the name a cluster spec selects), else the words joined by hyphens. The CPU gets
    ``cpu-torch`` so as not to replace ``cpu.json``, which ``measure_cpu_profile.py`` writes."""
    if device.type != "cuda":
        return "cpu-torch"
    words = [w for w in re.findall(r"[a-z0-9]+", name.lower()) if w not in ("nvidia", "tesla", "geforce", "amd")]
    for word in words:
        if re.fullmatch(r"[a-z]{1,2}\d{2,4}[a-z]?", word):
            return word
    return "-".join(words) or "gpu"


def available_host_bytes() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 4.0 * GIB


def total_memory_bytes(device: torch.device) -> float:
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 4.0 * GIB


def load_base(base: str | None, name: str) -> tuple[dict[str, float], str]:
    """Numbers for the keys this script cannot measure: a profile (a path, or a name in the
    project's profile directory; default this profile's own name), else :data:`DEFAULTS`."""
    candidates = [Path(base), PROFILE_DIR / f"{base}.json"] if base else [PROFILE_DIR / f"{name}.json"]
    for path in candidates:
        if path.is_file():
            raw = json.loads(path.read_text())
            return {k: float(raw.get(k, DEFAULTS[k])) for k in PROFILE_KEYS}, path.name
    if base:
        raise SystemExit(f"no base profile {base!r} (a path, or a name in {PROFILE_DIR})")
    return dict(DEFAULTS), "the public-source H100 defaults (docs/cost-model.md)"


def describe(
    name: str,
    device: torch.device,
    plan: Plan,
    dtype: torch.dtype,
    measured: dict[str, Any],
    carried: list[str],
    base_label: str,
    notes: list[str],
) -> str:
    """The profile's "description": what was measured, how, on what, and what was carried over."""
    a = plan.arch
    decode = [p for p in measured.get("decode", []) if "batch" in p and "kind" not in p]
    done = [f"{p['batch']}x{p['context']}" for p in decode if p["status"] == "measured"]
    skipped = [f"{p['batch']}x{p['context']} ({p['reason']})" for p in decode if p["status"] != "measured"]
    timing = {p.get("timing") for p in decode if p["status"] == "measured"}
    model_points = [p for p in measured.get("model", []) if p.get("status") == "measured"]
    train_tokens = sorted({p["tokens"] for p in model_points if p["kind"] == "train_forward_backward"})
    dtype_name = str(dtype).removeprefix("torch.")
    hw = measured["device_name"]
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        hw += f", {props.multi_processor_count} SMs, {props.total_memory / 1e9:.0f} GB, CUDA {torch.version.cuda}"
    parts = [
        f"{hw}; measured {datetime.date.today().isoformat()} by scripts/measure_gpu_profile.py with torch "
        f"{torch.__version__} ({measured['elapsed_s']:.0f} s), model {a.name} ({a.num_params:.3g} "
        f"parameters) in {dtype_name}.",
        f"peak_flops_bf16 the best {dtype_name} GEMM (square {'/'.join(map(str, plan.square_sizes))} or "
        f"layer-shaped); hbm_bytes_per_s the best of a device copy/add of "
        f"{plan.bandwidth_bytes / 2**20:.0f} MiB; eta_compute the layer's four GEMMs at {plan.layer_tokens} "
        f"tokens against that peak; eta_weights and linear_op_overhead_s slope and intercept of the time of "
        f"y = x @ W against bytes ({len(plan.stream_shapes)} layer matrices at "
        f"{'/'.join(map(str, plan.stream_tokens))} tokens, W streamed from memory, bytes actually moved).",
        f"t_fix_s, c_seq_s, eta_kv fitted to one decode step (forward + sampling, {'/'.join(sorted(timing)) or 'not'} "
        f"timed) with the cache pre-filled, over batch x context {', '.join(done) or 'none'}"
        + (f"; skipped {', '.join(skipped)}" if skipped else "")
        + ", after subtracting the linear-layer time those fields predict.",
        f"eta_prefill a forward of {plan.prefill_prompts} x {plan.prefill_tokens}-token prompts; mfu_forward "
        f"(log-prob forward) and mfu_train (forward + backward, no optimizer) at "
        f"{max(train_tokens) if train_tokens else 'no'} tokens, FLOPs 2/6 x params x tokens against the "
        f"measured peak; pcie_bytes_per_s "
        + ("a pinned host-to-device copy." if device.type == "cuda" else "the copy bandwidth (one host)."),
        f"Carried from {base_label}: {', '.join(carried)}.",
    ]
    if notes:
        parts.append("Notes: " + "; ".join(notes) + ".")
    return " ".join(parts)


def round3(value: float) -> float:
    return float(f"{value:.3g}")


def print_plan(plan: Plan, base: dict[str, float], elem_bytes: int, budget_s: float, kv_fraction: float) -> float:
    """Every phase and decode point with its estimated seconds, from the base profile's numbers
    (the run itself re-estimates from what it measures); returns the total."""
    hbm, peak = base["hbm_bytes_per_s"], base["peak_flops_bf16"]
    a = plan.arch
    room = kv_fraction * (base["memory_bytes"] - a.num_params * elem_bytes)
    room -= 2 * GIB + 16.0 * max(plan.batches) * a.vocab
    total = 15.0  # CUDA start-up, cuBLAS handles, model build, the micro-benchmarks' graph captures
    print(f"set-up and micro-benchmarks ~{total:.0f} s")
    for batch, context in decode_points(plan):
        kv_bytes = batch * context * a.kv_elements_per_token * elem_bytes
        if kv_bytes > room:
            print(f"decode batch {batch:4d} x context {context:5d}: KV {kv_bytes / 1e9:7.1f} GB, does not fit")
            continue
        est = decode_point_estimate_s(plan, batch, context, elem_bytes, hbm, peak)
        print(f"decode batch {batch:4d} x context {context:5d}: KV {kv_bytes / 1e9:7.1f} GB, ~{est:5.1f} s")
        total += est
    model_s = model_phase_estimate_s(plan, peak)
    print(f"prefill / log-prob / training: ~{model_s:.1f} s")
    total += model_s
    print(f"total ~{total:.0f} s of the {budget_s:.0f} s budget (pessimistic: half bandwidth, third of peak)")
    return total


def write_outputs(out: Path, profile: dict[str, Any], points: dict[str, Any]) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile, indent=2) + "\n")
    points_path = Path(f"{out}.points.json")
    points_path.write_text(json.dumps(points, indent=2, default=str) + "\n")
    return points_path


def run_phase(name: str, notes: list[str], fn: Callable[[], Any]) -> Any:
    """Run one phase; a failure is noted (its keys are then carried over) instead of ending the run."""
    try:
        return fn()
    except Exception as exc:  # a failed phase must not cost the others' results
        log(f"{name} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
        notes.append(f"{name} failed ({type(exc).__name__})")
        return None


def measure_all(
    plan: Plan,
    device: torch.device,
    dtype: torch.dtype,
    base: dict[str, float],
    args: argparse.Namespace,
    notes: list[str],
    points_path: Path,
) -> dict[str, Any]:
    """Every phase in turn, the cheap micro-benchmarks first, the decode sweep within the budget
    left less a reserve for the model phase. After each phase the measurements so far go to the
    points file (marked partial), so that a run killed at its slot's end still leaves them."""
    clock = Clock(device)
    hw_name = device_name(device)
    measured: dict[str, Any] = {"device_name": hw_name, "memory_bytes": total_memory_bytes(device)}
    log(f"{hw_name}: torch {torch.__version__}, {str(dtype).removeprefix('torch.')}, model {plan.arch.name}")

    def phase(key: str, name: str, fn: Callable[[], Any]) -> Any:
        measured[key] = run_phase(name, notes, fn)
        points_path.parent.mkdir(parents=True, exist_ok=True)
        partial = {"partial": True, "notes": notes, "elapsed_s": BUDGET.elapsed_s()} | measured
        points_path.write_text(json.dumps(partial, indent=2, default=str) + "\n")
        return measured[key]

    if gemm := phase("gemm", "GEMM peak", lambda: measure_gemms(clock, plan, device, dtype)):
        log("GEMM TFLOP/s: " + ", ".join(f"{k} {v / 1e12:.1f}" for k, v in gemm["flops_per_s"].items()))
    if bw := phase("bandwidth", "bandwidth", lambda: measure_bandwidth(clock, plan, device)):
        log(f"bandwidth GB/s: copy {bw['copy_bytes_per_s'] / 1e9:.0f}, add {bw['add_bytes_per_s'] / 1e9:.0f}")
    stream = phase("weight_streaming", "weight streaming", lambda: measure_weight_streaming(clock, plan, device, dtype))
    log(f"weight streaming: {len(stream or [])} points")
    hbm = bw["copy_bytes_per_s"] if bw else base["hbm_bytes_per_s"]
    peak = max(gemm["flops_per_s"].values()) if gemm else base["peak_flops_bf16"]

    max_positions = max([*plan.contexts, plan.prefill_tokens, plan.train_seq_len]) + 1
    model = run_phase("model build", notes, lambda: Decoder(plan.arch, device, dtype, max_positions))
    if model is not None and args.model_dir is not None:
        run_phase("weight loading", notes, lambda: load_hf_weights(model, args.model_dir))
    if model is not None:
        log(f"model built: {plan.arch.num_params:.4g} parameters")
        reserve_s = model_phase_estimate_s(plan, peak) + 5.0

        def sweep() -> list[dict[str, Any]]:
            return measure_decode_sweep(
                clock,
                plan,
                model,
                device,
                dtype,
                hbm=hbm,
                peak=peak,
                kv_fraction=args.kv_mem_fraction,
                reserve_s=reserve_s,
            )

        phase("decode", "decode sweep", sweep)
        phase("model", "model phase", lambda: measure_model_phase(clock, plan, model, device, peak))
        phase("weight_copy", "weight copy", lambda: measure_weight_copy(clock, model))
    if device.type == "cuda":
        phase("host_copy", "host copy", lambda: measure_host_copy(clock, plan, device))
    elif bw:  # one host: "PCIe" is a memory copy, as in measure_cpu_profile.py
        rate = bw["copy_bytes_per_s"]
        measured["host_copy"] = {"h2d_bytes_per_s": rate, "d2h_bytes_per_s": rate, "rule": "host copy"}
    measured["elapsed_s"] = BUDGET.elapsed_s()
    return {k: v for k, v in measured.items() if v is not None}


def parse_ints(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in text.split(",") if v.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    global BUDGET
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="profile JSON (default: the project's profiles/<slug>.json)")
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--quick", action="store_true", help="tiny model and sizes, to test the script (needs --out)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="wall-clock cap of the measuring (default 480)")
    parser.add_argument("--model-dir", type=Path, help="HF checkpoint directory: its config.json (and weights)")
    parser.add_argument(
        "--dtype", choices=("bfloat16", "float16", "float32"), help="default bf16 on a GPU, fp32 on a CPU"
    )
    parser.add_argument("--base", help="profile (path or name) for the keys not measured (default: this name's)")
    parser.add_argument("--name", help="the profile's name (default: --out's stem, else the device's slug)")
    parser.add_argument("--kv-mem-fraction", type=float, default=0.85, help="of free memory the KV cache may take")
    parser.add_argument(
        "--batches", type=parse_ints, help="decode batch sizes, comma-separated (default 1,8,32,128,512)"
    )
    parser.add_argument("--contexts", type=parse_ints, help="decode context lengths (default 512,2048,8192)")
    parser.add_argument("--plan", action="store_true", help="print the points and estimated times; measure nothing")
    args = parser.parse_args(argv)
    BUDGET = Budget(args.budget_s)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available() and not args.plan:
        raise SystemExit("no CUDA device here: run on a GPU host, or test with --device cpu --quick --out PATH")
    if args.quick and args.out is None and not args.plan:
        raise SystemExit("--quick needs --out: its numbers are a test, not a profile for the project")
    plan = QUICK if args.quick else FULL
    if args.batches:
        plan = replace(plan, batches=args.batches)
    if args.contexts:
        plan = replace(plan, contexts=args.contexts)
    if args.model_dir is not None:
        config = json.loads((args.model_dir / "config.json").read_text())
        plan = replace(plan, arch=arch_from_hf_config(args.model_dir.name, config))
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float32)
    elem = torch.tensor([], dtype=dtype).element_size()
    hw_name = device_name(device) if (device.type != "cuda" or torch.cuda.is_available()) else "a GPU"
    name = args.name or (args.out.name.removesuffix(".json") if args.out else slug_device(hw_name, device))
    base, base_label = load_base(args.base, name)
    if args.plan:
        print_plan(plan, base, elem, args.budget_s, args.kv_mem_fraction)
        return 0
    out = args.out or PROFILE_DIR / f"{name}.json"
    torch.manual_seed(0)
    if args.quick and device.type == "cpu":
        torch.set_num_threads(1)  # a test on a shared host: tiny work gains nothing from more threads
    notes: list[str] = []
    measured = measure_all(plan, device, dtype, base, args, notes, Path(f"{out}.points.json"))
    values, carried = derive_profile(measured, plan, elem, base, notes)
    check_decode_fit(measured, values, plan, elem)
    profile: dict[str, Any] = {
        "name": name,
        "description": describe(name, device, plan, dtype, measured, carried, base_label, notes),
    }
    profile |= {k: round3(v) for k, v in values.items()}
    profile["padded_kv_cache"] = False  # a GPU rolls out on vLLM: a paged cache, no padding
    # Fitted on the CPU host only (scripts/measure_cpu_engine_profile.py): a full-size model's
    # prefills, forwards and updates are charged by FLOPs, data parallelism across GPUs is
    # linear, rollout workers are engines of their own (vLLM), and no real run on this host is
    # forecast against a speed reference.
    profile |= {"prefill_fix_s": 0.0, "forward_elementwise_s": 0.0, "train_elementwise_s": 0.0}
    profile |= {"prefill_seq_s": 0.0, "weight_load_s": 0.0}  # vLLM's CPU build's, per sequence and reload
    profile |= {"parallel_fraction": 1.0, "parallel_fraction_by_params": [], "rollout_threads_parallel_fraction": 1.0}
    profile["reference_s"] = None
    points = {
        "profile": name,
        "device": hw_name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "dtype": str(dtype).removeprefix("torch."),
        "arch": asdict(plan.arch) | {"num_params": plan.arch.num_params},
        "budget_s": args.budget_s,
        "carried": carried,
        "notes": notes,
        "host": {"platform": platform.platform(), "cpus": os.cpu_count()},
    } | measured

    print(f"\n{'batch':>6} {'context':>8} {'measured ms':>12} {'model ms':>10} {'error %':>8}")
    for p in measured.get("decode", []):
        if p.get("status") == "measured":
            row = f"{p['batch']:6d} {p['context']:8d} {1e3 * p['seconds']:12.3f}"
            print(f"{row} {1e3 * p['predicted_s']:10.3f} {p['error_pct']:+8.1f}")
    print(f"\n{'key':24} {'value':>10}")
    for key in PROFILE_KEYS:
        print(f"{key:24} {profile[key]:>10.3g}{'  (carried)' if key in carried else ''}")
    points_path = write_outputs(out, profile, points)
    print(f"\nwrote {out} and {points_path.name} after {BUDGET.elapsed_s():.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
