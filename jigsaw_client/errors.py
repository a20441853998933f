"""What can go wrong talking to the server: it answered with an error, or it could not be reached."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from jigsaw_client.models import ErrorDetail


class ClientError(Exception):
    """Base of everything the client raises."""


class ApiError(ClientError):
    """The server's ``{"error": {"code", "message", "details"}}``, or the best reading of a
    response that is not in that shape (a proxy's error page, say)."""

    def __init__(self, status: int, code: str, message: str, details: Sequence[ErrorDetail] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details)

    def __str__(self) -> str:
        lines = [f"{self.message} ({self.code}, HTTP {self.status})"]
        lines += [f"{d['field']}: {d['message']}" for d in self.details]
        return "\n".join(lines)

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            error = response.json()["error"]
            details = [
                ErrorDetail(field=str(d.get("field", "")), message=str(d.get("message", "")))
                for d in error.get("details") or []
            ]
            return cls(response.status_code, str(error["code"]), str(error["message"]), details)
        except (ValueError, KeyError, TypeError, AttributeError):
            text = " ".join(response.text.split())[:200] or response.reason_phrase
            return cls(response.status_code, f"http_{response.status_code}", text)


class ConnectionFailed(ClientError):
    """No answer: refused, timed out, or the connection dropped (after the retries)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"could not reach {url}: {reason}")
        self.url = url
        self.reason = reason


class UnexpectedResponse(ClientError):
    """A 2xx answer whose body is not the JSON object the schema promises."""

    def __init__(self, url: str, body: Any) -> None:
        super().__init__(f"{url} answered with something other than a JSON object: {json.dumps(body)[:200]}")
