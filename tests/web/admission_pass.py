"""An admission pass held mid-decision on its own thread: what the admission tests race against."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from webapp.jobs import admission


@contextmanager
def pass_held_mid_decision(monkeypatch: Any) -> Iterator[dict[str, Any]]:
    """Start a pass and hold it once it has decided its first job, before it writes that
    decision; on exit it goes on and ends. The yielded dict gets the pass's result under
    ``result``."""
    deciding, release = threading.Event(), threading.Event()

    def holding(write: Any) -> Any:
        def held(*args: Any, **kwargs: Any) -> Any:
            deciding.set()
            release.wait(10)
            return write(*args, **kwargs)

        return held

    for name in ("admit", "wait"):
        monkeypatch.setattr(admission._DatabaseEffects, name, holding(getattr(admission._DatabaseEffects, name)))
    outcome: dict[str, Any] = {}

    def a_pass() -> None:
        try:
            outcome["result"] = admission.admission_tick()
        finally:
            connection.close()

    thread = threading.Thread(target=a_pass)
    thread.start()
    try:
        assert deciding.wait(10)
        yield outcome
    finally:
        release.set()
        thread.join(timeout=20)
