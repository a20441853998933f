"""Roofline-style cost model of RL sub-stages (every formula and constant: ``docs/cost-model.md``).

Every policy is charged by this one model: it is never tuned per policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw_engine.cost.device import DeviceProfile, parallel_fraction_for
from jigsaw_engine.spec.models import ModelSpec

FRAMEWORK_FACTOR = 1.2
"""Public verl / NeMo-RL step times run about 20% slower than the bare-model estimate."""
WAKE_S = 0.5
"""Fixed cost of resuming a parked job on a device (process wake-up, allocator, NCCL groups)."""
LINEAR_OPS_PER_LAYER = 4
"""QKV projection, output projection, MLP up (gate+up fused), MLP down: one GEMM kernel each."""
ROOFLINE_SMOOTHING_P = 2.0
"""Exponent of the smooth max ``(a**p + b**p)**(1/p)`` joining the weight-streaming and compute
times of a GEMM. Vidur's profiles show the two do not overlap fully where they are comparable
(64-1k tokens: a hard max under-predicts by up to 40%, a plain sum over-predicts by as much);
p = 2 (quadrature) keeps both ends exact and roughly halves the error in between."""


def attention_flops(model: ModelSpec, square_tokens: float) -> float:
    """Forward FLOPs of attention's two token-by-token matmuls (scores, then weighted values)
    over sequences whose lengths squared sum to ``square_tokens``: 2 x 2 x layers x hidden per
    pair of tokens (the query width taken as the hidden size). The whole score matrix is
    counted, as PaLM's MFU accounting (its appendix B) and verl's FLOPs counter do, so the
    fitted efficiencies mean the same thing; a training step costs three times this."""
    return 4.0 * model.num_layers * model.hidden_size * square_tokens


def forward_flops(model: ModelSpec, *, tokens: float, square_tokens: float = 0.0) -> float:
    """A forward over ``tokens`` in sequences whose lengths squared sum to ``square_tokens``:
    2 FLOPs per parameter per token, plus attention's."""
    return 2.0 * model.num_params * tokens + attention_flops(model, square_tokens)


def train_flops(model: ModelSpec, *, tokens: float, square_tokens: float = 0.0) -> float:
    """A forward and backward (one epoch): three forwards' FLOPs."""
    return 3.0 * forward_flops(model, tokens=tokens, square_tokens=square_tokens)


def smooth_max(a: float, b: float) -> float:
    """``(a**p + b**p)**(1/p)`` with p = :data:`ROOFLINE_SMOOTHING_P`: the larger of a
    memory-bound and a compute-bound time, plus the partial overlap measured between them."""
    p = ROOFLINE_SMOOTHING_P
    return float((a**p + b**p) ** (1.0 / p))


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
        linear_s = smooth_max(weights_s, compute_s)  # as fitted on measured GEMMs (linear_layer_s)
        return d.t_fix_s + d.c_seq_s * batch + linear_s + kv_s + self._allreduce_s(model, batch, tp)

    def linear_layer_s(
        self,
        *,
        hidden_size: int,
        intermediate_size: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        gated_mlp: bool,
        tokens: int,
        tp: int = 1,
    ) -> float:
        """One transformer layer's linear operators (Vidur's ``attn_pre_proj``,
        ``attn_post_proj``, ``mlp_up_proj``, ``mlp_down_proj``) for ``tokens`` tokens, each
        matrix sharded ``tp`` ways; collectives are not included (see ``_allreduce_s``)."""
        d = self.device
        q_width, kv_width = num_heads * head_dim, num_kv_heads * head_dim
        params = (
            hidden_size * (q_width + 2 * kv_width)  # QKV projection
            + q_width * hidden_size  # output projection
            + hidden_size * intermediate_size * (2 if gated_mlp else 1)  # up (gate + up)
            + intermediate_size * hidden_size  # down
        ) / tp
        weights_s = 2.0 * params / (d.eta_weights * d.hbm_bytes_per_s)
        compute_s = 2.0 * params * tokens / (d.eta_compute * d.peak_flops_bf16)
        # Every op has the same arithmetic intensity (tokens FLOPs per weight byte), so the
        # smooth max of the layer totals equals the sum of the per-op smooth maxes.
        return LINEAR_OPS_PER_LAYER * d.linear_op_overhead_s + smooth_max(weights_s, compute_s)

    def prefill_s(
        self, model: ModelSpec, *, tokens: float, tp: int = 1, square_tokens: float = 0.0, sequences: int = 0
    ) -> float:
        """A prefill of ``tokens`` new tokens of ``sequences`` sequences; ``square_tokens`` is
        the attention's score-matrix size summed over sequences (a whole prompt of P tokens: P
        squared; n tokens appended to a cached context of c: n x (c + n)). On a short prompt
        attention is noise beside 2N per token; on a multi-turn conversation re-prefilled whole
        it is not. ``sequences`` is charged at ``prefill_seq_s`` (0 on most profiles)."""
        d = self.device
        flops = forward_flops(model, tokens=tokens, square_tokens=square_tokens)
        return d.prefill_fix_s + sequences * d.prefill_seq_s + flops / (tp * d.eta_prefill * d.peak_flops_bf16)

    def kv_copy_s(self, model: ModelSpec, *, tokens: float, tp: int = 1) -> float:
        """One pass over ``tokens`` of KV cache outside attention: a padded engine (see
        :attr:`DeviceProfile.padded_kv_cache`) copies its whole cache, widened to its longest
        row, to merge rows that join a running batch, and copies the rows left out of it when
        some end. Charged at the engine's own rate per
        byte of cache (``eta_kv``, which a decode iteration's concatenation is fitted into)."""
        d = self.device
        return tokens * model.kv_bytes_per_token / (tp * d.eta_kv * d.hbm_bytes_per_s)

    def parallel_devices(self, model: ModelSpec, num_gpus: int) -> float:
        """How many devices' worth of speed ``model``'s forward or update gets from ``num_gpus``
        devices (:func:`parallel_fraction_for` its size; all of them on GPU clusters)."""
        f = parallel_fraction_for(self.device, model.num_params)
        return 1.0 / ((1.0 - f) + f / max(1, num_gpus))

    def logprob_forward_s(self, model: ModelSpec, *, tokens: float, num_gpus: int, square_tokens: float = 0.0) -> float:
        """A log-prob forward over ``tokens``; ``square_tokens`` (the sum of each sequence's
        length squared) adds attention, which outgrows 2N per token on long sequences."""
        d = self.device
        flops = forward_flops(model, tokens=tokens, square_tokens=square_tokens)
        elementwise_s = d.forward_elementwise_s * tokens * model.num_layers * model.hidden_size
        gemm_s = FRAMEWORK_FACTOR * flops / (d.mfu_forward * d.peak_flops_bf16)
        return (gemm_s + elementwise_s) / self.parallel_devices(model, num_gpus)

    def train_s(
        self, model: ModelSpec, *, tokens: float, num_gpus: int, epochs: int = 1, square_tokens: float = 0.0
    ) -> float:
        d = self.device
        flops = train_flops(model, tokens=tokens, square_tokens=square_tokens) * epochs
        adam_s = 16.0 * model.num_params / (num_gpus * d.hbm_bytes_per_s)
        elementwise_s = d.train_elementwise_s * tokens * epochs * model.num_layers * model.hidden_size
        gemm_s = FRAMEWORK_FACTOR * flops / (d.mfu_train * d.peak_flops_bf16)
        return (gemm_s + elementwise_s) / self.parallel_devices(model, num_gpus) + adam_s

    def weight_sync_s(self, model: ModelSpec) -> float:
        """The new weights into the job's rollout engine: a transfer, and the engine's reload
        (:attr:`DeviceProfile.weight_load_s`; a real vLLM job here has one engine)."""
        d = self.device
        return d.sync_alpha_s + model.weight_bytes_bf16 / d.sync_bytes_per_s + d.weight_load_s

    def context_switch_s(self, model: ModelSpec, *, num_gpus: int, training: bool) -> float:
        """Bring a job's state back from host memory onto ``num_gpus`` devices (warm start):
        the bf16 weights for rollout, the full training state (16 bytes per parameter) for
        training, over PCIe, plus a fixed wake-up."""
        bytes_per_param = 16.0 if training else 2.0
        return bytes_per_param * model.num_params / (num_gpus * self.device.pcie_bytes_per_s) + WAKE_S

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
