"""Helpers shared by the browser tests."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.db import connection

T = TypeVar("T")


def off_loop(fn: Callable[[], T]) -> T:
    """Run ``fn`` in a thread of its own: Playwright's event loop runs on the test's thread,
    where publishing an event to the WebSocket layer (async_to_sync) is refused."""

    def run() -> T:
        try:
            return fn()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()
