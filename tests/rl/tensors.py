"""Float64 tensors from literals: the hand-worked examples are exact at this precision."""

from __future__ import annotations

import torch

F64 = torch.float64


def t(values: object) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)
