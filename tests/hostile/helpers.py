"""Shared by the hostile-input tests: a client holding a tenant token, and the one error shape."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.test import APIClient


def client_for(token: str, address: str = "127.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def submit(client: APIClient, body: Any, **extra: Any) -> Any:
    return client.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()), **extra)


def error_of(response: Any) -> dict[str, Any]:
    """The body's ``error`` after checking it has the API's one shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"} and error["message"], error
    for detail in error["details"]:
        assert set(detail) == {"field", "message"} and detail["field"] and detail["message"], detail
    return dict(error)
