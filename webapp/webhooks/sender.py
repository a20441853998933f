"""One HTTP POST to a checked address: the connection goes to the address the check passed
(not to a fresh lookup of the name), TLS still verifies the certificate for the host name, and
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


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=ssl.create_default_context())
        self._address = target.address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


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
