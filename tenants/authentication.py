"""DRF authentication by API token: ``Authorization: Bearer jrl_<key id>_<secret>``."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions

from tenants.services import api_token_authenticate


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "bearer"

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword:
            return None
        token = api_token_authenticate(raw=raw.strip())
        if token is None:
            raise exceptions.AuthenticationFailed("invalid, expired or revoked API token")
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="api"'
