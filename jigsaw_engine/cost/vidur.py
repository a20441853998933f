"""Reader of Microsoft Vidur's measured linear-layer profiles (``compute/<gpu>/<model>/mlp.csv``),
used to check and fit the cost model's per-layer linear time (``docs/cost-model.md``); the
profiles the tests read are shipped in ``data/vidur-profiles/``.

Times in the file are milliseconds per layer; only the four GEMM operators are summed, the
element-wise ones (layer norms, activation, rope, add) are left out.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from jigsaw_engine.errors import JigsawError

LINEAR_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
"""Vidur's names of QKV projection, output projection, MLP up (gate+up) and MLP down."""


class VidurProfileError(JigsawError):
    """A Vidur profile file that does not have the documented shape."""

    code = "vidur_profile_invalid"


@dataclass(frozen=True, slots=True)
class VidurLinearRow:
    """One measured (tokens, tp) point of one model's linear layers."""

    tokens: int
    """Tokens in the batch (``num_tokens``)."""
    tp: int
    """Tensor-parallel degree (``num_tensor_parallel_workers``): each matrix is 1/tp of a layer's."""
    measured_ms: float
    """Sum of the medians of the four linear operators, milliseconds per layer."""
    n_head: int
    n_kv_head: int
    n_embd: int
    """Hidden size."""
    n_expanded_embd: int
    """MLP intermediate size."""
    use_gated_mlp: bool
    """Gated MLP (SwiGLU): the up projection holds gate and up matrices."""

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def read_vidur_mlp_csv(path: Path) -> list[VidurLinearRow]:
    """Rows of a Vidur ``mlp.csv`` in file order (repeated (tokens, tp) points are kept)."""
    rows: list[VidurLinearRow] = []
    with path.open(newline="") as f:
        for line_no, raw in enumerate(csv.DictReader(f), start=2):
            try:
                rows.append(_parse_row(raw))
            except (KeyError, ValueError) as exc:
                raise VidurProfileError(f"{path}:{line_no}: {exc!r}") from exc
    return rows


def _parse_row(raw: dict[str, str]) -> VidurLinearRow:
    gated = raw["use_gated_mlp"].strip().lower()
    if gated not in ("true", "false"):
        raise ValueError(f"use_gated_mlp must be True or False, got {raw['use_gated_mlp']!r}")
    return VidurLinearRow(
        tokens=int(raw["num_tokens"]),
        tp=int(raw["num_tensor_parallel_workers"]),
        measured_ms=sum(float(raw[f"time_stats.{op}.median"]) for op in LINEAR_OPS),
        n_head=int(raw["n_head"]),
        n_kv_head=int(raw["n_kv_head"]),
        n_embd=int(raw["n_embd"]),
        n_expanded_embd=int(raw["n_expanded_embd"]),
        use_gated_mlp=gated == "true",
    )
