"""A server process moves its start-up heap out of the garbage collector's full passes, so a
full collection walks what requests allocate, not the ~100,000 objects of Django and the app."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import gc, json
import webapp.asgi
print(json.dumps({"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}))
"""


def heap_after_startup(freeze: bool) -> dict[str, int]:
    env = {**os.environ, "GC_FREEZE_AFTER_STARTUP": "1" if freeze else "0"}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True).stdout
    figures: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return figures


@pytest.mark.parametrize("freeze", [True, False])
def test_the_server_freezes_what_start_up_loaded_unless_told_not_to(freeze: bool) -> None:
    heap = heap_after_startup(freeze)
    if freeze:
        assert heap["frozen"] > 50_000  # Django, DRF, every view and the schema's modules
        assert heap["tracked"] < heap["frozen"] / 10  # what a full collection still walks
    else:
        assert heap["frozen"] == 0 and heap["tracked"] > 50_000
