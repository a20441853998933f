"""Where a process's tensors compute: its GPU where CUDA exists, else the CPU.

A real run's devices are what its cluster spec declares (cores, or GPUs reserved from Ray),
but what a process computes on is what that process can see. The two differ on purpose where
Ray declares GPUs on a host without CUDA (``ray.init(num_gpus=4)``): the GPU cluster's code
runs as it would on GPUs (one process per GPU, Ray's GPU ids and ``CUDA_VISIBLE_DEVICES`` in
each), and its tiny models compute on the CPU. So the choice is made once per process, here
(:func:`resolve_compute_device`, logged), and every place that differs between the two asks
the :class:`ComputeDevice` it returns instead of testing for CUDA itself.

What only runs with CUDA, each behind a method whose CPU twin is what the tests run:

- ``bind``: ``torch.cuda.set_device`` on the one GPU Ray gave the process;
- ``collective_backend``: NCCL for a trainer group's collectives (gloo on the CPU);
- ``autocast``: bf16 autocast of the forwards (their backwards follow the forwards' dtypes) on a
  GPU that supports bf16 (float32 weights and optimizer state either way; nothing on the CPU,
  where bf16 matmuls are slower than float32 ones);
- ``to_device`` / ``to_host``: models and batches onto the GPU, results and whole state back
  to host memory before they cross a process (identity on the CPU);
- ``vllm_args``: vLLM on the GPU in bf16 with ``gpu_memory_utilization`` set to the memory
  share the scheduler planned for the rollout worker (on the CPU, float32 and a fixed KV cache).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import torch

logger = logging.getLogger(__name__)

ComputeKind = Literal["cuda", "cpu"]

VLLM_CPU_KV_CACHE_BYTES = 64 << 20
"""vLLM's KV cache on the CPU: small (tiny models, shared machines)."""

VLLM_MIN_GPU_SHARE = 0.05
"""Least ``gpu_memory_utilization`` a vLLM engine gets: its CUDA context, the activations of
its profiling run and a few KV blocks need a few GiB whatever the model, more than the
scheduler's footprint of a tiny one (its weights and KV cache)."""

VLLM_MAX_GPU_SHARE = 0.9
"""Most a vLLM engine may take of its GPU: what vLLM itself allows by default."""


@dataclass(frozen=True, slots=True)
class ComputeDevice:
    kind: ComputeKind
    name: str
    """What the log says: the GPU's name, or ``cpu``."""

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cuda", 0) if self.kind == "cuda" else torch.device("cpu")

    @property
    def collective_backend(self) -> Literal["nccl", "gloo"]:
        return "nccl" if self.kind == "cuda" else "gloo"

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """bf16 on a GPU that computes in it; None: no autocast (float32 throughout)."""
        if self.kind == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return None

    def bind(self) -> None:
        """Make the process's GPU the current one (Ray shows it as ``cuda:0``); nothing on the CPU."""
        if self.kind == "cuda":
            torch.cuda.set_device(0)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        dtype = self.autocast_dtype
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type="cuda", dtype=dtype)

    def to_device(self, value: Any) -> Any:
        """A tensor, module or :class:`~jigsaw_engine.train.token_batch.TokenBatch`-like value
        (anything with ``.to``) on this device; unchanged on the CPU."""
        if self.kind == "cpu" or value is None:
            return value
        return value.to(self.torch_device)

    def to_host(self, value: Any) -> Any:
        """Tensors, also inside dicts, lists and tuples, in host memory; unchanged on the CPU."""
        if self.kind == "cpu":
            return value
        return _to_host(value)

    def vllm_args(self, memory_share: float | None) -> dict[str, Any]:
        """vLLM ``EngineArgs`` that depend on the device: its dtype and memory budget."""
        if self.kind == "cpu":
            return {"dtype": "float32", "kv_cache_memory_bytes": VLLM_CPU_KV_CACHE_BYTES}
        share = VLLM_MIN_GPU_SHARE if memory_share is None else memory_share
        return {
            "dtype": "bfloat16" if self.autocast_dtype is not None else "float16",
            "gpu_memory_utilization": min(VLLM_MAX_GPU_SHARE, max(VLLM_MIN_GPU_SHARE, share)),
        }


CPU = ComputeDevice("cpu", "cpu")


@cache
def resolve_compute_device() -> ComputeDevice:
    """This process's compute device, decided once: its GPU where CUDA is available, else the
    CPU (also where Ray declared GPUs that are not there). Logged, with what Ray gave."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if torch.cuda.is_available():
        device = ComputeDevice("cuda", torch.cuda.get_device_name(0))
        logger.info("compute device: %s (CUDA_VISIBLE_DEVICES=%s)", device.name, visible)
        return device
    logger.info(
        "compute device: cpu (no CUDA here%s)",
        f"; Ray gave GPU(s) {visible}, which compute on the CPU" if visible else "",
    )
    return CPU


def _to_host(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_host(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_host(v) for v in value)
    return value
