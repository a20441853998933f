"""Failpoints: named places where a fault-injection run makes the code wait, so that it can
kill a process at a precise moment: after the engine accepted a job but before the Celery task
that sent it is acknowledged (``dispatch.after_submit``), while a real rollout generates
(``rollout.mid_generation``), between two optimizer steps of one update (``train.mid_update``).
Inert unless ``JIGSAW_FAILPOINTS`` names them, as ``name=sleep:<seconds>`` pairs separated by
commas; the control plane's production settings refuse the variable."""

from __future__ import annotations

import logging
import os
import time
from functools import cache

logger = logging.getLogger(__name__)

ENV_VAR = "JIGSAW_FAILPOINTS"


@cache
def _configured() -> dict[str, float]:
    points: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in os.environ.get(ENV_VAR, "").split(","))):
        name, _, action = item.partition("=")
        kind, _, seconds = action.partition(":")
        if kind != "sleep":
            raise ValueError(f"{ENV_VAR}: {item!r}: the only action is sleep:<seconds>")
        points[name.strip()] = float(seconds)
    return points


def failpoint(name: str) -> None:
    """Wait here if a fault-injection run asked for it; otherwise return at once."""
    delay = _configured().get(name)
    if delay:
        logger.warning("failpoint %s: waiting %.1f s", name, delay)
        time.sleep(delay)
