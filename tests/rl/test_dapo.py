"""DAPO's dynamic sampling filter and soft overlong punishment."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from jigsaw_engine.rl.dapo import GroupCounts, count_informative_groups, informative_groups, overlong_penalty


def test_informative_groups_keep_only_mixed_scores() -> None:
    # group 0 = [1, 1, 1] all equal -> drop; group 1 = [0, 1] -> keep; group 2 = [0, 0] -> drop;
    # group 3 = [5] alone -> drop. Group 1's members are not adjacent.
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 5.0])
    group_ids = torch.tensor([0, 1, 0, 0, 2, 1, 2, 3])
    keep = informative_groups(scores, group_ids)
    assert keep.tolist() == [False, True, False, False, False, True, False, False]
    assert count_informative_groups(scores, group_ids) == GroupCounts(
        kept_groups=1, dropped_groups=3, kept_responses=2, dropped_responses=6
    )


def test_informative_groups_with_continuous_scores() -> None:
    # [0.3, 0.30001] differ -> keep; [0.7, 0.7] -> drop
    keep = informative_groups(torch.tensor([0.3, 0.30001, 0.7, 0.7]), torch.tensor([4, 4, 9, 9]))
    assert keep.tolist() == [True, True, False, False]


def test_informative_groups_empty_batch() -> None:
    keep = informative_groups(torch.zeros(0), torch.zeros(0, dtype=torch.long))
    assert keep.shape == (0,)
    assert count_informative_groups(torch.zeros(0), torch.zeros(0, dtype=torch.long)).total_groups == 0


def test_informative_groups_rejects_mismatched_group_ids() -> None:
    with pytest.raises(ValueError, match="group_ids"):
        informative_groups(torch.zeros(3), torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize(
    ("penalty_factor", "expected"),
    [
        # max 20, buffer 4 -> the buffer starts at 16:
        # L=10, 16 -> 0; L=17 -> (16 - 17) / 4 = -0.25; 18 -> -0.5; 20 -> -1; 25 (beyond) -> -1
        (1.0, [0.0, 0.0, -0.25, -0.5, -1.0, -1.0]),
        (0.5, [0.0, 0.0, -0.125, -0.25, -0.5, -0.5]),
    ],
)
def test_overlong_penalty(penalty_factor: float, expected: list[float]) -> None:
    lengths = torch.tensor([10, 16, 17, 18, 20, 25])
    got = overlong_penalty(lengths, max_length=20, buffer_length=4, penalty_factor=penalty_factor)
    assert_close(got, torch.tensor(expected))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_length": 0, "buffer_length": 1}, "max_length"),
        ({"max_length": 10, "buffer_length": 0}, "buffer_length"),
        ({"max_length": 10, "buffer_length": 11}, "buffer_length"),
        ({"max_length": 10, "buffer_length": 2, "penalty_factor": -1.0}, "penalty_factor"),
    ],
)
def test_overlong_penalty_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        overlong_penalty(torch.tensor([5]), **kwargs)  # type: ignore[arg-type]
