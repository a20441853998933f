"""``jigsaw jobs rewards`` and ``JigsawClient.rewards()``: what a spec's data.grader may name on
the server, the operator's rewards beside the built-in graders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.reward_plugin import INSTALLED, operator_rewards

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["operator_rewards"]  # the fixture: the test rewards installed where the server finds them


def test_the_cli_lists_the_servers_rewards(jigsaw: Any, operator_rewards: Path) -> None:
    human = jigsaw("jobs", "rewards")
    assert human.code == 0, human.err
    assert human.out.startswith("exact_match  (in-process; built in)\n")
    assert "math  (10 s per reply; built in)" in human.out
    assert "slow  (0.3 s per reply; jigsaw_test_rewards:slow (jigsaw_test_rewards 0.1))\n" in human.out
    assert "  suits: generated arithmetic" in human.out
    assert human.out.endswith("choose one with data.grader: NAME in the spec\n")
    listed = json.loads(jigsaw("jobs", "rewards", "--json").out)
    assert [r["name"] for r in listed] == ["exact_match", "numeric", "math", *INSTALLED]
