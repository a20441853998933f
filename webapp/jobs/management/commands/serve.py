"""Serve HTTP and WebSockets with uvicorn. In standalone mode this one process is the whole
stack: tasks run in-process and a thread pumps engine events into the database and the
in-memory channel layer (which only this process can see)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand

logger = logging.getLogger(__name__)


ADMIT_EVERY = 4  # pump rounds: every 2 s, as beat does
RECONCILE_EVERY = 20  # every 10 s


def _pump_forever(stop: threading.Event, interval_s: float) -> None:
    """Standalone mode's beat: the event pump, the admission pass and the reconciler."""
    from django.db import close_old_connections

    from webapp.jobs.admission import admission_tick
    from webapp.jobs.reconcile import reconcile
    from webapp.jobs.services.engine_events import engine_events_pump

    rounds = 0
    while not stop.wait(interval_s):
        rounds += 1
        try:
            engine_events_pump()
            if rounds % ADMIT_EVERY == 0:
                admission_tick()
            if rounds % RECONCILE_EVERY == 0:
                reconcile()
        except Exception:  # keep going: each of them retries from what is stored
            logger.exception("standalone background round failed")
        finally:
            close_old_connections()


class Command(BaseCommand):
    help = "Run the ASGI server (HTTP + WebSocket); in standalone mode also the event pump, admission and reconciler."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        if settings.STANDALONE:
            threading.Thread(target=_pump_forever, args=(stop, 0.5), name="event-pump", daemon=True).start()
        config = uvicorn.Config(
            "webapp.asgi:application",
            host=options["host"],
            port=options["port"],
            log_level="warning",
            lifespan="off",
            timeout_keep_alive=settings.HTTP_KEEP_ALIVE_S,
        )
        try:
            uvicorn.Server(config).run()
        finally:
            stop.set()
