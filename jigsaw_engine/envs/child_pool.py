"""Work in child processes that can be killed: each item answered within its own deadline.

Graders that run code the engine does not control (math-verify, an operator's reward) run in
children speaking JSON lines: one hello line at start (``{"ready": true}`` or ``{"error": ...}``),
then for each request ``{"op", "items"}`` one answer line per item, in order. A child that misses
an item's deadline, dies or closes its pipe is killed and replaced; the item is answered with the
caller's stand-in, and the reason it stood in is told. Children are kept in a small pool, started
on first use, so grading from many threads neither serializes on one process nor pays a start per
reply.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

START_DEADLINE_S = 60.0
"""Time a new child may take to start and import what it needs (math-verify and sympy: about
half a second when warm)."""


class ChildStuck(Exception):
    """The child missed a deadline (``timed_out``), died, or closed its pipe; the message says which."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.timed_out = timed_out


class ChildWorker:
    """One child running ``python -m module *args``, with the engine's package importable."""

    def __init__(self, module: str, *args: str, stderr: int | None = subprocess.DEVNULL) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in: IO[bytes] = self.process.stdin
        self._out: IO[bytes] = self.process.stdout
        self._buffer = bytearray()
        try:
            hello = self.receive(START_DEADLINE_S)
        except ChildStuck as exc:
            self.kill()
            raise RuntimeError(f"its process did not start ({exc})") from None
        if "error" in hello:
            self.kill()
            raise RuntimeError(str(hello["error"]))

    def send(self, op: str, items: Sequence[object]) -> None:
        try:
            self._in.write(json.dumps({"op": op, "items": list(items)}).encode("utf-8") + b"\n")
            self._in.flush()
        except OSError as exc:
            raise ChildStuck(self._ended()) from exc

    def receive(self, deadline_s: float) -> dict[str, Any]:
        """The next answer line, read straight from the pipe (a buffered reader would hide
        lines from ``select``)."""
        fd = self._out.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], deadline_s)
            if not ready:
                raise ChildStuck(f"no answer within {deadline_s:g} s", timed_out=True)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ChildStuck(self._ended())
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _ended(self) -> str:
        try:
            code = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "its process closed its output"
        return f"its process exited with status {code}"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for pipe in (self._in, self._out):
            with contextlib.suppress(OSError):
                pipe.close()


class ChildPool:
    """Up to ``max_workers`` children made by ``start``, each used by one thread at a time."""

    def __init__(self, start: Callable[[], ChildWorker], *, max_workers: int) -> None:
        self._start = start
        self._max_workers = max_workers
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_workers)
        self._idle: list[ChildWorker] = []
        self._closed = False
        os.register_at_fork(after_in_child=self.forget)

    def run(
        self, op: str, items: Sequence[object], *, deadline_s: float, on_stuck: Callable[[ChildStuck], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Each item's answer in order; ``on_stuck(why)`` for an item whose child missed its
        ``deadline_s`` or died. A child that cannot start raises RuntimeError."""
        results: list[dict[str, Any]] = []
        with self._slots:
            while len(results) < len(items):
                with self._lock:
                    worker = self._idle.pop() if self._idle else None
                if worker is None:
                    worker = self._start()
                pending = items[len(results) :]
                try:
                    worker.send(op, pending)
                    for _ in pending:
                        results.append(worker.receive(deadline_s))
                except ChildStuck as exc:
                    worker.kill()
                    results.append(on_stuck(exc))
                    continue
                with self._lock:
                    if self._closed:
                        worker.kill()
                    else:
                        self._idle.append(worker)
        return results

    def close(self) -> None:
        """End the idle children (one in use ends when its thread gives it back: it is not kept)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
        for worker in idle:
            worker.kill()

    def forget(self) -> None:
        """Start empty; after a fork the children belong to the parent, and this process starts its own."""
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self._max_workers)
        self._idle = []
        self._closed = False
