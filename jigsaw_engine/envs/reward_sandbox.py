"""An installed reward run where it cannot hurt the job: in child processes, with its time limit.

Each reply is scored in a child (:mod:`jigsaw_engine.envs.reward_worker`) of the process that holds
the job's environment (its environment actor on Ray). A reward that raises, returns something
other than a finite number, runs past its limit (its child is killed and replaced) or takes its
child down fails that reply only: :class:`~jigsaw_engine.envs.reward.RewardError` says how, the
episode scores :data:`~jigsaw_engine.envs.reward.FAILED_SCORE`, and the sample shows the reason.
"""

from __future__ import annotations

import os
import threading
from functools import partial
from typing import Any

from jigsaw_engine.envs.child_pool import ChildPool, ChildStuck, ChildWorker
from jigsaw_engine.envs.reward import RewardError
from jigsaw_engine.envs.reward_registry import find_reward

MAX_WORKERS = max(1, min(4, os.cpu_count() or 1))


class SandboxedReward:
    """``grader(reply, reference) -> float`` for the installed reward ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.time_limit_s = find_reward(name).reward.time_limit_s
        # Inherits stderr: what the reward prints or logs shows in the engine's log.
        start = partial(ChildWorker, "jigsaw_engine.envs.reward_worker", name, stderr=None)
        self._pool = ChildPool(start, max_workers=MAX_WORKERS)

    def __call__(self, reply: str, reference: str) -> float:
        try:
            answer = self._pool.run("grade", [[reply, reference]], deadline_s=self.time_limit_s, on_stuck=self._stuck)[
                0
            ]
        except RuntimeError as exc:  # its child did not start (its import fails, say)
            raise RewardError(f"reward {self.name!r} could not start: {exc}") from exc
        value = answer.get("value")
        if "error" in answer or not isinstance(value, float):
            raise RewardError(f"reward {self.name!r} {answer.get('error', 'gave no number')}")
        return value

    def close(self) -> None:
        self._pool.close()

    def _stuck(self, why: ChildStuck) -> dict[str, Any]:
        if why.timed_out:
            return {"error": f"ran past its time limit of {self.time_limit_s:g} s (its process was replaced)"}
        return {"error": f"took its process down ({why})"}


_lock = threading.Lock()
_sandboxes: dict[str, SandboxedReward] = {}


def sandboxed_reward(name: str) -> SandboxedReward:
    """The one sandbox per reward per process (its children are shared by every episode)."""
    with _lock:
        found = _sandboxes.get(name)
        if found is None:
            found = _sandboxes[name] = SandboxedReward(name)
        return found


def close_sandboxes() -> None:
    """End every reward's idle children and forget the sandboxes (a new reward path, a test's end)."""
    with _lock:
        sandboxes = list(_sandboxes.values())
        _sandboxes.clear()
    for sandbox in sandboxes:
        sandbox.close()
