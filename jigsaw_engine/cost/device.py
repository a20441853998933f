"""Per-device constants, kept as data files (``profiles/<name>.json``) so a measured profile
replaces a modelled one without code changes."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cache
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
    reward_s_per_sequence: float = 0.002
    """Wall time of a step's reward sub-stage per sequence: rule-based graders on CPU workers
    in parallel, about 2 ms a sequence beside GPU training; where grading happens inside the
    episodes, only the assembly of the training batch is left (tens of microseconds)."""


@cache
def load_device_profile(name: str) -> DeviceProfile:
    path = PROFILE_DIR / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.json"))
        raise KeyError(f"no device profile {name!r}; known: {', '.join(known)}")
    raw = json.loads(path.read_text())
    names = {f.name for f in fields(DeviceProfile)}
    return DeviceProfile(**{k: v for k, v in raw.items() if k in names})
