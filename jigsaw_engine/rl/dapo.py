"""DAPO's two data-side knobs: dynamic sampling and soft overlong punishment.

A group whose responses all scored the same has zero advantage under any group baseline, so it
adds nothing but noise and cost to the update: dynamic sampling drops it (and the caller samples
more prompts until the batch is full). Truncated responses carry no real verdict, so instead of a
cliff at the length limit the reward is lowered linearly through a buffer before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def _check_groups(scores: Tensor, group_ids: Tensor) -> None:
    if scores.dim() != 1:
        raise ValueError(f"scores: expected one score per response, shape [batch], got {tuple(scores.shape)}")
    if group_ids.shape != scores.shape:
        raise ValueError(
            f"group_ids: shape {tuple(group_ids.shape)} does not match scores {tuple(scores.shape)}; "
            "pass one group index per response"
        )


def informative_groups(scores: Tensor, group_ids: Tensor) -> Tensor:
    """Per response, whether its group is kept: ``True`` where the group's scores are not all equal.

    A group of one is never informative (its scores are trivially all equal).
    """
    _check_groups(scores, group_ids)
    _, inverse = torch.unique(group_ids, return_inverse=True)
    num_groups = int(inverse.max().item()) + 1 if inverse.numel() else 0
    highest = torch.full((num_groups,), -torch.inf, dtype=torch.float64, device=scores.device)
    lowest = torch.full((num_groups,), torch.inf, dtype=torch.float64, device=scores.device)
    as_float = scores.to(torch.float64)
    highest = highest.scatter_reduce(0, inverse, as_float, reduce="amax")
    lowest = lowest.scatter_reduce(0, inverse, as_float, reduce="amin")
    return (highest > lowest)[inverse]


@dataclass(frozen=True, slots=True)
class GroupCounts:
    kept_groups: int
    dropped_groups: int
    kept_responses: int
    dropped_responses: int

    @property
    def total_groups(self) -> int:
        return self.kept_groups + self.dropped_groups


def count_informative_groups(scores: Tensor, group_ids: Tensor) -> GroupCounts:
    """How many groups (and responses) dynamic sampling keeps and drops."""
    keep = informative_groups(scores, group_ids)
    kept_ids = torch.unique(group_ids[keep])
    total_groups = torch.unique(group_ids).numel()
    kept_responses = int(keep.sum().item())
    return GroupCounts(
        kept_groups=kept_ids.numel(),
        dropped_groups=total_groups - kept_ids.numel(),
        kept_responses=kept_responses,
        dropped_responses=keep.numel() - kept_responses,
    )


def overlong_penalty(lengths: Tensor, *, max_length: int, buffer_length: int, penalty_factor: float = 1.0) -> Tensor:
    """The reward to add for each response length (soft overlong punishment).

    With ``start = max_length - buffer_length``: 0 up to ``start``; ``(start - L) / buffer_length``
    through the buffer (down to -1 at ``max_length``); -1 beyond. All of it times ``penalty_factor``.
    """
    if max_length <= 0:
        raise ValueError(f"max_length: must be positive, got {max_length}; pass the maximum response length")
    if not 0 < buffer_length <= max_length:
        raise ValueError(
            f"buffer_length: must be in (0, max_length={max_length}], got {buffer_length}; "
            "a buffer of a few thousand tokens below the limit is usual"
        )
    if penalty_factor < 0.0:
        raise ValueError(f"penalty_factor: must be >= 0, got {penalty_factor}; 1.0 is usual")
    lengths = lengths if lengths.is_floating_point() else lengths.to(torch.float32)
    start = max_length - buffer_length
    linear = (start - lengths) / buffer_length
    penalty = torch.clamp(linear, min=-1.0, max=0.0)
    return penalty * penalty_factor
