"""``live_server_url`` and ``app_server`` (which can be stopped and started again): the real
ASGI app served by uvicorn in a thread of this process, on the test database, with a real
Celery worker and beat behind it. Conftests that need them import the fixtures (the e2e
dashboard tests, the API client tests)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """uvicorn serving the app in a thread; it can be stopped and started again on its port
    (a server restart, as the browser sees one)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: object | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import uvicorn

        from webapp.asgi import application

        server = uvicorn.Server(
            uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        )
        self._server, self._thread = server, threading.Thread(target=server.run, name="live-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("live server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True  # type: ignore[attr-defined]
            self._server.force_exit = True  # type: ignore[attr-defined]  # open sockets end too
            self._thread.join(timeout=10)
        self._server = self._thread = None


@pytest.fixture()
def app_server(transactional_db: None, celery_worker_thread: None) -> Iterator[LiveServer]:
    """The app serving this test's database, with a real Celery worker and beat behind it."""
    server = LiveServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def live_server_url(app_server: LiveServer) -> str:
    """The base URL (``http://127.0.0.1:<free port>``) of the app serving this test's database."""
    return app_server.url
