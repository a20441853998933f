"""Roofline-style cost model of RL sub-stages (formulas in ``shared/docs/BENCHMARKS.md`` §1).

Every policy is charged by this one model: it is never tuned per policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw_engine.cost.device import DeviceProfile
from jigsaw_engine.spec.models import ModelSpec

FRAMEWORK_FACTOR = 1.2
"""Public verl / NeMo-RL step times run about 20% slower than the bare-model estimate."""
STAGE_OVERHEAD_S = 0.5
"""Fixed cost per stage launch (worker RPCs, batch assembly)."""


@dataclass(frozen=True, slots=True)
class RooflineCostModel:
    device: DeviceProfile

    def decode_iteration_s(self, model: ModelSpec, *, batch: int, context_tokens: float, tp: int = 1) -> float:
        """One continuous-batching decode iteration with ``batch`` running sequences and
        ``context_tokens`` tokens of KV cache resident on the worker."""
        d = self.device
        weights_s = model.weight_bytes_bf16 / (tp * d.eta_weights * d.hbm_bytes_per_s)
        compute_s = 2.0 * model.num_params * batch / (tp * d.eta_compute * d.peak_flops_bf16)
        kv_s = context_tokens * model.kv_bytes_per_token / (tp * d.eta_kv * d.hbm_bytes_per_s)
        return d.t_fix_s + d.c_seq_s * batch + max(weights_s, compute_s) + kv_s + self._allreduce_s(model, batch, tp)

    def prefill_s(self, model: ModelSpec, *, tokens: float, tp: int = 1) -> float:
        d = self.device
        return 2.0 * model.num_params * tokens / (tp * d.eta_prefill * d.peak_flops_bf16)

    def logprob_forward_s(self, model: ModelSpec, *, tokens: float, num_gpus: int) -> float:
        d = self.device
        flops = 2.0 * model.num_params * tokens
        return FRAMEWORK_FACTOR * flops / (num_gpus * d.mfu_forward * d.peak_flops_bf16)

    def train_s(self, model: ModelSpec, *, tokens: float, num_gpus: int, epochs: int = 1) -> float:
        d = self.device
        flops = 6.0 * model.num_params * tokens * epochs
        adam_s = 16.0 * model.num_params / (num_gpus * d.hbm_bytes_per_s)
        return FRAMEWORK_FACTOR * flops / (num_gpus * d.mfu_train * d.peak_flops_bf16) + adam_s

    def weight_sync_s(self, model: ModelSpec) -> float:
        d = self.device
        return d.sync_alpha_s + model.weight_bytes_bf16 / d.sync_bytes_per_s

    def kv_capacity_tokens(self, model: ModelSpec, *, tp: int = 1, mem_fraction: float = 0.9) -> int:
        """Tokens of KV cache that fit beside the weights on one rollout worker."""
        free = tp * self.device.memory_bytes * mem_fraction - model.weight_bytes_bf16
        return max(0, int(free / model.kv_bytes_per_token))

    def _allreduce_s(self, model: ModelSpec, batch: int, tp: int) -> float:
        if tp == 1:
            return 0.0
        # Two all-reduces per layer of batch x hidden bf16 activations (ring: 2(tp-1)/tp).
        payload = 2.0 * batch * model.hidden_size * 2.0 * (tp - 1) / tp
        per_layer = 2.0 * (payload / self.device.nvlink_bytes_per_s + 8e-6)
        return model.num_layers * per_layer
