"""Helpers shared by the browser tests."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

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


WIDTHS = (1920, 1280)
"""The screen widths every page must be readable at."""


def check_widths(page: Any, name: str, artifacts: Path) -> None:
    """At each of ``WIDTHS``: no horizontal scrollbar (nothing wider than the window), and a
    full-page screenshot ``<name>-<width>.png``. The page's own console errors are checked
    by each test at its end."""
    height = page.viewport_size["height"] if page.viewport_size else 900
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_function("w => window.innerWidth === w", arg=width)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        overflow = page.evaluate(
            "() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth,"
            " wide: [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right"
            " > window.innerWidth + 1).slice(0, 5).map(e => e.tagName.toLowerCase() +"
            " (e.dataset.testid ? `[${e.dataset.testid}]` : '') + (e.className && typeof e.className === 'string'"
            " ? '.' + e.className.split(' ').join('.') : '')) })"
        )
        assert overflow["scroll"] <= overflow["inner"], f"{name} at {width} px scrolls sideways: {overflow}"
        page.screenshot(path=str(artifacts / f"{name}-{width}.png"), full_page=True)
