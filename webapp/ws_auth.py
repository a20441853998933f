"""WebSocket authentication: browsers use their session (and must come from an allowed
Origin); API clients send ``Authorization: Bearer <token>`` and may omit Origin."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator

from tenants.services import api_token_authenticate


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class OriginOrTokenValidator:
    """Cross-site WebSocket hijacking needs a browser, and browsers always send Origin: with
    one, it must name an allowed host (else the handshake is refused); without one, the caller
    is not a browser and goes on to authentication (a missing or bad token then closes 4401)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.origin_checked = AllowedHostsOriginValidator(app)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if _header(scope, b"origin") is None:
            return await self.app(scope, receive, send)
        return await self.origin_checked(scope, receive, send)


class TokenAuthMiddleware:
    """Sets ``scope['user']`` and ``scope['api_token']`` from a Bearer token when present."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        auth = _header(scope, b"authorization")
        scope = dict(scope)
        scope["api_token"] = None
        if auth and auth.lower().startswith("bearer "):
            token = await database_sync_to_async(api_token_authenticate)(raw=auth[7:].strip())
            if token is not None:
                scope["user"] = token.user
                scope["api_token"] = token
        return await self.app(scope, receive, send)
