"""``manage.py serve`` keeps an idle keep-alive connection well past uvicorn's 5 s default.

With 5 s, a client that sends every 5 s (the control-plane soak's creates) raced the server's
close: now and then its request went out on a connection the server was closing, and it got a
reset instead of an answer.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

IDLE_S = 6.0  # longer than uvicorn's default keep-alive (5 s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _head(conn: socket.socket, port: int) -> bytes:
    """One HEAD request (an answer with no body, so nothing is left unread on the connection)."""
    conn.sendall(f"HEAD /api/v1/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    conn.settimeout(10)
    answer = b""
    while b"\r\n\r\n" not in answer:
        try:
            chunk = conn.recv(65536)
        except ConnectionResetError:
            return answer
        if not chunk:
            return answer  # closed by the server
        answer += chunk
    return answer


def _connect_when_up(port: int, server: subprocess.Popen[bytes], timeout_s: float = 60.0) -> socket.socket:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"serve exited: {server.stdout.read().decode() if server.stdout else ''}")
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"serve did not listen on {port} within {timeout_s:.0f} s")


def test_an_idle_keep_alive_connection_still_answers_after_six_seconds(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "JIGSAW_STANDALONE": "1", "STANDALONE_DB": str(tmp_path / "serve.sqlite3")}
    env.pop("UVICORN_TIMEOUT_KEEP_ALIVE", None)  # the default is what is under test
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=120)
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with _connect_when_up(port, server) as conn:
            first = _head(conn, port)
            assert first.startswith(b"HTTP/1.1 "), first[:200]
            time.sleep(IDLE_S)
            second = _head(conn, port)
            assert second.startswith(b"HTTP/1.1 "), f"the server closed the idle connection: {second[:200]!r}"
    finally:
        server.terminate()
        server.wait(timeout=15)
