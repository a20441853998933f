"""The rewards a server offers (``GET /api/v1/rewards``): what a spec's ``data.grader`` may name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict


class Reward(TypedDict):
    name: str
    description: str
    suits: str
    time_limit_s: float | None
    """Per reply; None: a built-in grader that runs in the environment's own process."""
    builtin: bool
    source: str


class RewardPage(TypedDict):
    results: list[Reward]


def reward_table(rewards: Iterable[Reward]) -> str:
    """One reward per paragraph: its name and limit, then what earns reward and what it suits."""
    blocks = []
    for r in rewards:
        limit = "in-process" if r["time_limit_s"] is None else f"{r['time_limit_s']:g} s per reply"
        origin = "built in" if r["builtin"] else r["source"]
        blocks.append(f"{r['name']}  ({limit}; {origin})\n  {r['description']}\n  suits: {r['suits']}")
    if not blocks:
        return "no rewards"
    return "\n\n".join(blocks) + "\n\nchoose one with data.grader: NAME in the spec"
