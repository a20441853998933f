"""Keep the garbage collector's full passes off the request path.

A process of this app holds about 100,000 container objects once Django, DRF, the URL
configuration and the schema are loaded, and a full (generation 2) collection walks all of them:
55-63 ms on this project's 2-core machine, during which the process answers nothing, so every
request queued behind it waits that long (the p99 spikes of the control-plane benchmark). Those
objects live as long as the process, so they are moved to the permanent generation once, after
start-up (``gc.freeze``): later collections walk only what requests allocate.
"""

from __future__ import annotations

import gc

from django.conf import settings


def freeze_startup_heap() -> int:
    """Load what every request needs, then freeze it; returns how many objects were frozen
    (0 when ``GC_FREEZE_AFTER_STARTUP`` is off)."""
    if not settings.GC_FREEZE_AFTER_STARTUP:
        return 0
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports every view, serializer and the schema's modules
    gc.collect()  # what start-up left as garbage goes now, not frozen with the rest
    gc.freeze()
    return gc.get_freeze_count()
