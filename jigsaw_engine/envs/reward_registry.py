"""The rewards installed here: every ``jigsawrl.rewards`` entry point, the built-in graders first.

Entry points are found where Python finds distributions (the engine's environment), plus the
folders in ``$JIGSAW_REWARD_PATHS`` (``os.pathsep``-separated, each holding a package's module and
its ``*.dist-info``), which are added to ``sys.path`` so their modules import. The built-in graders
are registered the same way in ``pyproject.toml``; a checkout used without being installed still
has them. What is found is kept for the process's life: an operator restarts the web and engine
processes after installing a reward.

Listing a reward imports its module (its description and limit live there) but never calls it;
an entry point that does not load is left out, and the log says why.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import sys
from dataclasses import dataclass

from jigsaw_engine.envs.graders import BUILTIN_REWARDS, GRADER_NAMES, IN_PROCESS_GRADERS
from jigsaw_engine.envs.reward import ENTRY_POINT_GROUP, Reward

logger = logging.getLogger(__name__)

REWARD_PATHS_ENV = "JIGSAW_REWARD_PATHS"
_BUILTIN_MODULE = "jigsaw_engine.envs.graders"


@dataclass(frozen=True, slots=True)
class InstalledReward:
    name: str
    """What a spec's ``data.grader`` names."""
    description: str
    suits: str
    time_limit_s: float | None
    """Per reply, enforced by killing its process; None: a built-in that runs in the
    environment's own process (a regular expression over a bounded reply)."""
    builtin: bool
    source: str
    """The entry point's target and its distribution (``module:attr (dist version)``)."""
    reward: Reward


def installed_rewards() -> dict[str, InstalledReward]:
    """Every reward installed here by name: the built-in graders first, then the rest by name."""
    return _discover(os.environ.get(REWARD_PATHS_ENV, ""))


def reward_names() -> list[str]:
    return list(installed_rewards())


def unknown_reward_message(name: object) -> str:
    """Why ``name`` is refused, listing what is installed."""
    return (
        f"unknown reward {name!r}; installed rewards: {', '.join(reward_names())} "
        "(GET /api/v1/rewards says what each suits; an operator installs others)"
    )


def find_reward(name: str) -> InstalledReward:
    """The installed reward ``name``; ValueError listing the installed ones otherwise."""
    found = installed_rewards().get(name)
    if found is None:
        raise ValueError(unknown_reward_message(name))
    return found


def load_reward(name: str) -> Reward:
    """Only the reward ``name`` imported (a reward's child process needs no other); ValueError
    if no entry point names it, what its import raises if it does not load."""
    entry = _entry_points(os.environ.get(REWARD_PATHS_ENV, "")).get(name)
    if entry is None:
        if name in BUILTIN_REWARDS:
            return BUILTIN_REWARDS[name]  # type: ignore[index]  # narrowed by the membership test
        raise ValueError(f"no installed reward is named {name!r}")
    return _as_reward(entry.load())


@functools.cache
def _discover(paths: str) -> dict[str, InstalledReward]:
    found: dict[str, InstalledReward] = {}
    for entry in _entry_points(paths).values():
        installed = _load(entry)
        if installed is not None:
            found[entry.name] = installed
    for name, installed in _builtins().items():
        found.setdefault(name, installed)
    builtins = [name for name in GRADER_NAMES if name in found]
    return {name: found[name] for name in [*builtins, *sorted(set(found) - set(builtins))]}


def _entry_points(paths: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The group's entry points by name, the built-ins' first (a name taken twice keeps the
    first), with the folders in ``paths`` added to ``sys.path``. Read from every distribution on
    the path, not with ``entry_points(group=)``: that keeps one distribution per name, and a
    stale ``jigsawrl.egg-info`` in the working directory (an old build's) would hide the
    installed one's rewards."""
    for folder in filter(None, paths.split(os.pathsep)):
        if folder not in sys.path:
            sys.path.append(folder)
    entries = [
        e for dist in importlib.metadata.distributions() for e in dist.entry_points if e.group == ENTRY_POINT_GROUP
    ]
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for entry in sorted(entries, key=lambda e: (e.module != _BUILTIN_MODULE, e.name)):
        first = found.setdefault(entry.name, entry)
        if first.value != entry.value:
            logger.warning(
                "reward %r: entry point %s is ignored; %s has the name", entry.name, entry.value, first.value
            )
    return found


def _load(entry: importlib.metadata.EntryPoint) -> InstalledReward | None:
    dist = entry.dist
    source = f"{entry.value} ({dist.name} {dist.version})" if dist is not None else entry.value
    try:
        reward = _as_reward(entry.load())
    except Exception as exc:  # an operator's package: leave it out, say why, list the rest
        logger.warning("reward %r (%s) is not available: %s: %s", entry.name, source, type(exc).__name__, exc)
        return None
    builtin = entry.module == _BUILTIN_MODULE
    return _installed(entry.name, reward, builtin=builtin, source=source)


def _as_reward(target: object) -> Reward:
    """What an entry point names, as a :class:`Reward`: itself, or a plain function with its
    docstring's first line as the description and the default time limit."""
    if isinstance(target, Reward):
        return target
    if not callable(target):
        raise TypeError(f"the entry point names a {type(target).__name__}, not a Reward or a function")
    doc = (getattr(target, "__doc__", None) or "").strip()
    return Reward(score=target, description=doc.splitlines()[0] if doc else "(no description)")


def _installed(name: str, reward: Reward, *, builtin: bool, source: str) -> InstalledReward:
    in_process = builtin and name in IN_PROCESS_GRADERS
    return InstalledReward(
        name=name,
        description=reward.description,
        suits=reward.suits,
        time_limit_s=None if in_process else reward.time_limit_s,
        builtin=builtin,
        source=source,
        reward=reward,
    )


def _builtins() -> dict[str, InstalledReward]:
    return {
        name: _installed(name, reward, builtin=True, source=f"{_BUILTIN_MODULE} (built in)")
        for name, reward in BUILTIN_REWARDS.items()
    }
