"""A webhook receiver for tests: a real HTTP server in a thread of this process that checks
each delivery's signature as docs/api.md tells a receiver to, and records what it was sent.

It can start down: its port is bound but not listening, so a delivery's connection is refused
(as by a stopped receiver) until ``start`` listens on that same port."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


def verify(secret: str, timestamp: str, body: bytes, signature: str, tolerance_s: int = 300) -> bool:
    """The check docs/api.md gives a receiver."""
    if abs(time.time() - int(timestamp)) > tolerance_s:
        return False
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(f"v1={expected}", signature)


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)  # type: ignore[no-any-return]


@dataclass
class Receiver:
    answer_status: int = 200
    answer_delay_s: float = 0.0
    tls: ssl.SSLContext | None = None
    """Serve HTTPS with this server-side context."""
    received: list[Received] = field(default_factory=list)
    request_started: threading.Event = field(default_factory=threading.Event)
    """Set once a delivery's body has been read, before the answer's delay."""
    _server: HTTPServer | None = None

    def __post_init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        self.port = self._socket.getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/hooks/jigsaw"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.request_started.set()
                time.sleep(receiver.answer_delay_s)
                receiver.received.append(Received(dict(self.headers.items()), body))
                self.send_response(receiver.answer_status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        server = HTTPServer(self._socket.getsockname(), Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = self._socket
        server.server_activate()  # listen on the port held since construction
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(self._socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        else:
            self._socket.close()

    def event_ids(self) -> list[str]:
        return [r.headers["Jigsaw-Event-Id"] for r in self.received]
