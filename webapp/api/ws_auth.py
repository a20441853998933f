"""WebSocket authentication: browsers use their session (and must come from an allowed
Origin); API clients send ``Authorization: Bearer <token>`` and may omit Origin. Bad tokens
count against the sender's address as they do over HTTP."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator

from tenants.models import ApiToken
from tenants.services import api_token_authenticate
from webapp.api.throttling import BadTokenGuard, client_address


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


CLOSE_TOO_MANY_BAD_TOKENS = 4429


def _scope_address(scope: dict[str, Any]) -> str:
    meta = {"REMOTE_ADDR": (scope.get("client") or ("",))[0]}
    forwarded = _header(scope, b"x-forwarded-for")
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded
    return client_address(meta)


def _checked_token(raw: str, address: str) -> tuple[ApiToken | None, bool]:
    """(the active token for ``raw``, whether ``address`` is refused for sending bad ones)."""
    guard = BadTokenGuard()
    if guard.wait_s(address) is not None:
        return None, True
    token = api_token_authenticate(raw=raw)
    if token is None:
        guard.record_failure(address)
    return token, False


async def _accept_and_close(receive: Any, send: Any, code: int) -> None:
    """A close code reaches the client only after the handshake, so accept first."""
    while (await receive())["type"] != "websocket.connect":
        pass
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": code})


class TokenAuthMiddleware:
    """Sets ``scope['user']`` and ``scope['api_token']`` from a Bearer token when present. An
    address that sent too many bad tokens (HTTP or WebSocket alike) is closed with 4429."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        auth = _header(scope, b"authorization")
        scope = dict(scope)
        scope["api_token"] = None
        if auth and auth.lower().startswith("bearer "):
            token, refused = await database_sync_to_async(_checked_token)(auth[7:].strip(), _scope_address(scope))
            if refused:
                return await _accept_and_close(receive, send, CLOSE_TOO_MANY_BAD_TOKENS)
            if token is not None:
                scope["user"] = token.user
                scope["api_token"] = token
        return await self.app(scope, receive, send)
