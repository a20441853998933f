"""Calls to a job's worker actors (rollout engines, environments), with their deaths told apart.

A worker whose process dies under a call is *lost*: nothing is wrong with the job, which resumes
from its checkpoint (:class:`~jigsaw_engine.errors.WorkerLostError`). A worker that could not be
built (a bad model path, an environment that raises) is the job's own fault: that fails it,
with the reason.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.exceptions import RayActorError

from jigsaw_engine.errors import WorkerLostError


def call_worker(what: str, method: Any, *args: Any) -> Any:
    """``ray.get`` of ``method.remote(*args)`` on the worker called ``what`` in messages."""
    try:
        return ray.get(method.remote(*args))
    except RayActorError as exc:
        if exc.actor_init_failed:
            reason = next((line for line in reversed(exc.error_msg.splitlines()) if line.strip()), "")
            raise RuntimeError(f"{what} could not be built: {reason.strip()}") from exc
        raise WorkerLostError(f"{what} died ({type(exc).__name__})") from exc
