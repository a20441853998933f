"""``live_server_url``: the real ASGI app served by uvicorn in a thread of this process, on
the test database, with a real Celery worker and beat behind it. Conftests that need it
import the fixture (the e2e dashboard tests, the API client tests)."""

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


@pytest.fixture()
def live_server_url(transactional_db: None, celery_worker_thread: None) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:<free port>``) of the app serving this test's database."""
    import uvicorn

    from webapp.asgi import application

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("live server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
