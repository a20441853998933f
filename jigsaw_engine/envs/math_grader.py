"""The ``math`` grader: math-verify's ``parse`` and ``verify``, as verl's math recipes use them.

The reference is read as the content of a ``\\boxed{}`` (so ``\\frac{1}{2}``, ``0.5`` and ``72``
all work), the reply by math-verify's LaTeX and plain-expression extraction (``\\boxed{}``,
``$x=5$``, ``The answer is 1/2``), and the two compared symbolically: 1.0 or 0.0.

math-verify bounds its work with ``signal.alarm``, which fails off the main thread, and some
inputs (``\\boxed{9^{9^{9^{9}}}}``) run in C where no alarm reaches. So every parse runs in a
child process (:mod:`jigsaw_engine.envs.math_worker`) with a deadline per item: a child that
misses one is killed and replaced, and that reply earns 0. Children are kept in a small pool,
started on first use, so grading from many threads neither serializes on one process nor pays
a start per reply.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from jigsaw_engine.envs.child_pool import ChildPool, ChildStuck, ChildWorker
from jigsaw_engine.envs.graders import MATH_TIME_LIMIT_S

ITEM_DEADLINE_S = MATH_TIME_LIMIT_S
"""Wall time one reply (or reference) may take in the child before the child is killed.

A parse and a comparison each have math-verify's own alarm; this catches what the alarm cannot."""
MAX_WORKERS = max(1, min(4, os.cpu_count() or 1))
BATCH = 500
"""References checked per request to one child."""

_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _stands_in(value: object) -> Callable[[ChildStuck], dict[str, Any]]:
    """A stuck item's answer: ``value``, whatever the reason (a reply that hangs math-verify earns nothing)."""
    return lambda _reason: {"value": value}


_pool = ChildPool(partial(ChildWorker, "jigsaw_engine.envs.math_worker"), max_workers=MAX_WORKERS)


def grade_math(reply: str, reference: str) -> float:
    """1.0 when the reply's final answer equals ``reference`` mathematically (verl's ``math_verify``)."""
    value = _pool.run("grade", [[reply, reference]], deadline_s=ITEM_DEADLINE_S, on_stuck=_stands_in(0.0))[0]["value"]
    return float(value) if isinstance(value, int | float) else 0.0


def check_math_references(references: Sequence[str]) -> list[str | None]:
    """For each reference, why math-verify cannot read it (so no reply could match), or None."""
    unique = sorted({r for r in references if not _PLAIN_NUMBER.fullmatch(r)})
    readable: dict[str, bool] = {}
    for start in range(0, len(unique), BATCH):
        chunk = unique[start : start + BATCH]
        readable.update(
            zip(
                chunk,
                [
                    bool(a["value"])
                    for a in _pool.run("check", chunk, deadline_s=ITEM_DEADLINE_S, on_stuck=_stands_in(False))
                ],
                strict=True,
            )
        )
    return [
        None
        if readable.get(r, True)
        else f"answer {r!r} is not math that the math grader can read (it is read as LaTeX, as in \\boxed{{...}})"
        for r in references
    ]
