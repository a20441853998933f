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


def _pump_forever(stop: threading.Event, interval_s: float) -> None:
    from django.db import close_old_connections

    from webapp.jobs.services import engine_events_pump

    while not stop.wait(interval_s):
        try:
            engine_events_pump()
        except Exception:  # keep pumping: the next round retries from the saved cursor
            logger.exception("standalone event pump failed")
        finally:
            close_old_connections()


class Command(BaseCommand):
    help = "Run the ASGI server (HTTP + WebSocket); in standalone mode also the event pump."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        if settings.STANDALONE:
            threading.Thread(target=_pump_forever, args=(stop, 0.5), name="event-pump", daemon=True).start()
        config = uvicorn.Config(
            "webapp.asgi:application", host=options["host"], port=options["port"], log_level="warning", lifespan="off"
        )
        try:
            uvicorn.Server(config).run()
        finally:
            stop.set()
