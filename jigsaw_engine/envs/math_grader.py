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

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from jigsaw_engine.envs.math_worker import ALARM_S

ITEM_DEADLINE_S = 2 * ALARM_S + 4.0
"""Wall time one reply (or reference) may take in the child before the child is killed.

A parse and a comparison each have math-verify's own alarm; this catches what the alarm cannot."""
START_DEADLINE_S = 60.0
"""Time a new child may take to import math-verify and sympy (about half a second when warm)."""
MAX_WORKERS = max(1, min(4, os.cpu_count() or 1))
BATCH = 500
"""References checked per request to one child."""

_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class _Stuck(Exception):
    """The child missed a deadline, died, or closed its pipe."""


class _Worker:
    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jigsaw_engine.envs.math_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in: IO[bytes] = self.process.stdin
        self._out: IO[bytes] = self.process.stdout
        self._buffer = bytearray()
        try:
            hello = self.receive(START_DEADLINE_S)
        except _Stuck:
            self.kill()
            raise RuntimeError("the math grader's worker process did not start") from None
        if "error" in hello:
            self.kill()
            raise RuntimeError(str(hello["error"]))

    def send(self, op: str, items: Sequence[object]) -> None:
        try:
            self._in.write(json.dumps({"op": op, "items": list(items)}).encode("utf-8") + b"\n")
            self._in.flush()
        except OSError as exc:
            raise _Stuck() from exc

    def receive(self, deadline_s: float) -> dict[str, Any]:
        """The next answer line, read straight from the pipe (a buffered reader would hide
        lines from ``select``)."""
        fd = self._out.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], deadline_s)
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                raise _Stuck()
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for pipe in (self._in, self._out):
            with contextlib.suppress(OSError):
                pipe.close()


class _Pool:
    """Up to :data:`MAX_WORKERS` children, each used by one thread at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_WORKERS)
        self._idle: list[_Worker] = []

    def run(self, op: str, items: Sequence[object], on_stuck: object) -> list[object]:
        """Each item's answer in order; ``on_stuck`` for an item whose child missed its deadline."""
        results: list[object] = []
        with self._slots:
            while len(results) < len(items):
                with self._lock:
                    worker = self._idle.pop() if self._idle else None
                if worker is None:
                    worker = _Worker()
                pending = items[len(results) :]
                try:
                    worker.send(op, pending)
                    for _ in pending:
                        results.append(worker.receive(ITEM_DEADLINE_S)["value"])
                except _Stuck:
                    worker.kill()
                    results.append(on_stuck)
                    continue
                with self._lock:
                    self._idle.append(worker)
        return results

    def forget(self) -> None:
        """After a fork: the children belong to the parent; this process starts its own."""
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_WORKERS)
        self._idle = []


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.forget)


def grade_math(reply: str, reference: str) -> float:
    """1.0 when the reply's final answer equals ``reference`` mathematically (verl's ``math_verify``)."""
    value = _pool.run("grade", [[reply, reference]], on_stuck=0.0)[0]
    return float(value) if isinstance(value, int | float) else 0.0


def check_math_references(references: Sequence[str]) -> list[str | None]:
    """For each reference, why math-verify cannot read it (so no reply could match), or None."""
    unique = sorted({r for r in references if not _PLAIN_NUMBER.fullmatch(r)})
    readable: dict[str, bool] = {}
    for start in range(0, len(unique), BATCH):
        chunk = unique[start : start + BATCH]
        readable.update(zip(chunk, [bool(v) for v in _pool.run("check", chunk, on_stuck=False)], strict=True))
    return [
        None
        if readable.get(r, True)
        else f"answer {r!r} is not math that the math grader can read (it is read as LaTeX, as in \\boxed{{...}})"
        for r in references
    ]
