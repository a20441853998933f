"""One HTTP POST to a checked URL: the connection goes to the addresses the check passed (not
to a fresh lookup of the name), TLS still verifies the certificate for the host name, and
redirects are not followed (the place they point to was never checked)."""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass

from webapp.webhooks.addresses import Target

MAX_ANSWER_BYTES = 4096
"""Kept of an answer's body for the log: enough to read an error, not a page."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


def _connect(target: Target, timeout: float) -> socket.socket:
    """A connection to the first of the checked addresses that answers."""
    error: OSError | None = None
    for address in target.addresses:
        try:
            return socket.create_connection((address, target.port), timeout)
        except OSError as exc:
            error = exc
    raise error or OSError("no address to connect to")


def tls_context() -> ssl.SSLContext:
    """The system's trusted authorities, host names checked."""
    return ssl.create_default_context()


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=tls_context())
        self._target = target

    def connect(self) -> None:
        sock = _connect(self._target, self.timeout)  # type: ignore[arg-type]
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._target = target

    def connect(self) -> None:
        self.sock = _connect(self._target, self.timeout)  # type: ignore[arg-type]


def post(target: Target, *, body: bytes, headers: dict[str, str], timeout_s: float) -> Answer:
    """POST ``body``; raises ``OSError`` (refused, reset, timed out, TLS) when no answer came."""
    connection: http.client.HTTPConnection
    if target.scheme == "https":
        connection = _PinnedHTTPSConnection(target, timeout_s)
    else:
        connection = _PinnedHTTPConnection(target, timeout_s)
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        text = response.read(MAX_ANSWER_BYTES).decode("utf-8", "replace")
        return Answer(status=response.status, body=text)
    except http.client.HTTPException as exc:
        raise OSError(f"bad HTTP answer: {exc!r}") from exc
    finally:
        connection.close()
