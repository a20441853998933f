"""Per-device constants, kept as data files (``profiles/<name>.json``) so a measured profile
replaces a modelled one without code changes."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from functools import cache
from itertools import pairwise
from pathlib import Path

PROFILE_DIR = Path(__file__).with_name("profiles")


@dataclass(frozen=True, slots=True)
class DeviceProfile:
    name: str
    description: str
    peak_flops_bf16: float
    hbm_bytes_per_s: float
    memory_bytes: float
    t_fix_s: float
    """Fixed cost of one decode iteration (kernel launches, scheduling)."""
    c_seq_s: float
    """Per-running-sequence cost of one decode iteration (sampling, bookkeeping)."""
    eta_weights: float
    """Fraction of HBM bandwidth reached when streaming weights (dimensionless); fitted to Vidur's
    small-token linear-layer profiles where available."""
    eta_kv: float
    eta_compute: float
    """Fraction of bf16 peak reached by large dense GEMMs (dimensionless); fitted to Vidur's
    linear-layer profiles at 2k-32k tokens where available."""
    eta_prefill: float
    mfu_forward: float
    mfu_train: float
    nvlink_bytes_per_s: float
    inter_node_bytes_per_s: float
    pcie_bytes_per_s: float
    sync_alpha_s: float
    sync_bytes_per_s: float
    stage_overhead_s: float = 0.5
    """Fixed cost of launching a stage on this platform's runtime (worker RPCs, batch
    assembly, hand-back), seconds. 0.5 is a multi-GPU framework's (verl's Ray workers and
    collectives); a tiny model's step on one machine pays milliseconds, and with 0.5 its
    simulated steps come out several times too long."""
    linear_op_overhead_s: float = 0.0
    """Fixed time of one linear-layer kernel (launch, tail, epilogue), seconds. Seen as the
    intercept of time against weight bytes in Vidur's 1-16-token profiles; it is why small
    matrices reach a lower fraction of HBM bandwidth than large ones. Defaults to 0 (a pure
    roofline) for a profile not yet fitted to measurements."""
    padded_kv_cache: bool = False
    """The rollout engine keeps its running batch in one left-padded KV cache as wide as its
    longest row, and prefills a group of prompts padded to the longest (the project's torch
    engine, which the CPU profile measures): a decode iteration reads ``batch x longest
    context`` tokens of cache, not their sum. False for paged engines (vLLM, SGLang)."""
    prefill_fix_s: float = 0.0
    """Fixed cost of one prefill call, whatever it prefills (a forward through every layer:
    kernel launches, cache set-up), seconds. A multi-turn rollout prefills each turn that
    rejoins after a tool call on its own, so a tiny model pays this many times a step (2 ms
    for one 8-token prompt on tiny-qwen2-1m against 0.2 ms of its FLOPs). 0 charges prefills
    by FLOPs alone, as the GPU profiles do (not yet fitted there)."""
    prefill_seq_s: float = 0.0
    """Cost per sequence of a prefill, beside its FLOPs: an engine that sets up each request
    and draws its first token in Python pays it (vLLM's CPU build with the portable sampler,
    0.4 ms a sequence for a tiny model on one core, most of a large batch's prefill). 0 where
    prefills are charged by call and FLOPs alone (the GPU profiles, the torch engine)."""
    forward_elementwise_s: float = 0.0
    """Seconds per token, per layer and per unit of hidden size of a log-prob forward's work
    outside its matrix multiplies (norms, activations, rotary embeddings, residual adds:
    passes over the hidden state). Beside a tiny model's small matrices this is a fifth of
    the time, and more for narrower models, so one MFU fitted over 1M and 6M presets was
    20% off on each (the wrong way round); 0 where FLOPs alone are charged (the GPU profiles)."""
    train_elementwise_s: float = 0.0
    """The same for an update (forward and backward), per trained token."""
    parallel_fraction: float = 1.0
    """Share of a log-prob forward's or an update's time that divides over the devices one job
    trains on (Amdahl's law): on ``n`` devices it takes ``(1 - f) + f / n`` of its time on one.
    1 is perfect data parallelism, as FSDP across GPUs gives a full-size model. A CPU cluster's
    devices are cores serving the torch threads of one process, and a tiny model's 128-wide
    matrices hardly divide: measured, not assumed (``scripts/measure_cpu_engine_profile.py``)."""
    parallel_fraction_by_params: tuple[tuple[float, float], ...] = ()
    """``parallel_fraction`` measured per model size, as (parameters, fraction) pairs in
    ascending size (:func:`parallel_fraction_for`). What does not divide over threads is per
    operator (dispatch, autograd, small element-wise kernels), so the narrower the model the
    smaller the share that divides, and one fraction for every size forecasts the smallest
    models' updates too short (figures in ``docs/real-runs.md``). Empty: ``parallel_fraction``
    for every model."""
    rollout_threads_parallel_fraction: float = 1.0
    """Share of a rollout worker's time that runs beside another worker of the same job when
    the workers are threads of one process (Amdahl's law across them); the rest, the work
    that holds the interpreter's lock (torch dispatch, sampling, each episode's turns and
    tool calls in Python), runs one worker at a time. A tiny model's rollout is mostly that:
    two workers on two cores took 0.7-1.3x the time of both on one core, one after the other
    (``scripts/measure_rollout_threads.py``). Charged where the graph says the workers share
    a process (:attr:`~jigsaw_engine.graph.builder.GraphConfig.workers_share_process`); 1
    for GPU engines, whose kernels dwarf the Python around them."""
    reference_s: float | None = None
    """Seconds of :func:`jigsaw_engine.runtime.machine_speed.reference_seconds` on this host
    while the profile was measured: a real run times the same work beside itself and scales
    its forecast by the ratio (:func:`slowed_down`). None where the profile was not measured
    on the host it forecasts (the GPU profiles)."""
    reward_s_per_sequence: float = 0.002
    """Wall time of a step's reward sub-stage per sequence: rule-based graders on CPU workers
    in parallel, about 2 ms a sequence beside GPU training; where grading happens inside the
    episodes, only the assembly of the training batch is left (tens of microseconds)."""
    weight_load_s: float = 0.0
    """Fixed cost of loading new weights into one rollout engine at a weight sync, beside the
    bytes copied (``sync_alpha_s``, ``sync_bytes_per_s``): vLLM's in-memory reload walks its
    model's loader and drops its prefix cache, about 15 ms for a 1M-parameter model on one
    core, where the torch engine's copy of a state dict costs next to nothing. 0 where not
    measured (the GPU profiles, the torch engine)."""


TIME_FIELDS = (
    "t_fix_s",
    "c_seq_s",
    "prefill_fix_s",
    "prefill_seq_s",
    "forward_elementwise_s",
    "train_elementwise_s",
    "linear_op_overhead_s",
    "sync_alpha_s",
    "stage_overhead_s",
    "reward_s_per_sequence",
    "weight_load_s",
)
RATE_FIELDS = (
    "peak_flops_bf16",
    "hbm_bytes_per_s",
    "nvlink_bytes_per_s",
    "inter_node_bytes_per_s",
    "pcie_bytes_per_s",
    "sync_bytes_per_s",
)

SPEED_FREE_FIELDS = (
    "memory_bytes",
    "eta_weights",
    "eta_kv",
    "eta_compute",
    "eta_prefill",
    "mfu_forward",
    "mfu_train",
    "parallel_fraction",
    "parallel_fraction_by_params",
    "rollout_threads_parallel_fraction",
    "reference_s",
)
"""Fields a slower host leaves as they are: capacities, and fractions of the rates above."""


def parallel_fraction_for(profile: DeviceProfile, num_params: float) -> float:
    """The profile's parallel fraction for a model of ``num_params``: interpolated in log size
    between the measured sizes, the nearest one's outside them."""
    points = profile.parallel_fraction_by_params
    if not points:
        return profile.parallel_fraction
    if num_params <= points[0][0]:
        return points[0][1]
    for (small, f_small), (large, f_large) in pairwise(points):
        if num_params <= large:
            t = math.log(num_params / small) / math.log(large / small)
            return f_small + t * (f_large - f_small)
    return points[-1][1]


def slowed_down(profile: DeviceProfile, factor: float) -> DeviceProfile:
    """``profile``'s host running ``factor`` times slower: every fixed time longer and every
    rate lower by ``factor`` (efficiencies are fractions of the rates, so they stay), so every
    sub-stage the cost model charges takes ``factor`` times as long (but a parked job's fixed
    wake-up, ``WAKE_S``, which no CPU run pays)."""
    if factor <= 0:
        raise ValueError(f"factor: must be > 0, got {factor}")
    changes: dict[str, float] = {name: getattr(profile, name) * factor for name in TIME_FIELDS}
    changes |= {name: getattr(profile, name) / factor for name in RATE_FIELDS}
    return replace(profile, **changes)  # type: ignore[arg-type]


ROLLOUT_ENGINES_KEY = "rollout_engines"
"""A profile file's per-rollout-engine overrides: engine name -> the constants measured on that
engine (its own ``description`` says how and when), which replace the profile's own where a
run's rollouts are on that engine (:func:`load_device_profile`)."""


@cache
def load_device_profile(name: str, rollout_engine: str | None = None) -> DeviceProfile:
    """The profile ``name``; with ``rollout_engine``, its constants measured on that engine
    (:data:`ROLLOUT_ENGINES_KEY`) over the rest, where the file has them (else the profile as
    it is: the GPU profiles hold no engine of their own)."""
    path = PROFILE_DIR / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.json"))
        raise KeyError(f"no device profile {name!r}; known: {', '.join(known)}")
    raw = json.loads(path.read_text())
    names = {f.name for f in fields(DeviceProfile)}
    values = {k: v for k, v in raw.items() if k in names}
    override = raw.get(ROLLOUT_ENGINES_KEY, {}).get(rollout_engine) if rollout_engine is not None else None
    if override:
        unknown = sorted(set(override) - names)
        if unknown:
            raise KeyError(f"device profile {name!r}, rollout engine {rollout_engine!r}: unknown fields {unknown}")
        description = f"{values['description']} Rollout engine {rollout_engine}: {override['description']}"
        values |= {**override, "description": description}
    if "parallel_fraction_by_params" in values:  # JSON lists; the profile is hashable
        values["parallel_fraction_by_params"] = tuple(
            (float(size), float(f)) for size, f in sorted(values["parallel_fraction_by_params"])
        )
    return DeviceProfile(**values)
