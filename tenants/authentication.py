"""DRF authentication by API token: ``Authorization: Bearer jrl_<key id>_<secret>``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
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


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[misc]
    """Documents the token in the OpenAPI schema as an HTTP bearer scheme."""

    target_class = "tenants.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "jrl_<key id>_<secret>"}
