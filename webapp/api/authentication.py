"""DRF authentication by API token: ``Authorization: Bearer jrl_<key id>_<secret>``; an address
that sends too many bad tokens is refused for a while (429, see ``webapp.api.throttling``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from tenants.services import api_token_authenticate
from webapp.api.throttling import BadTokenGuard, client_address, too_many_bad_tokens


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "bearer"

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword:
            return None
        address = client_address(request.META)
        guard = BadTokenGuard()
        wait = guard.wait_s(address)
        if wait is not None:  # refused unchecked: a right guess must look like a wrong one
            raise too_many_bad_tokens(wait)
        token = api_token_authenticate(raw=raw.strip())
        if token is None:
            guard.record_failure(address)
            raise exceptions.AuthenticationFailed("invalid, expired or revoked API token")
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="api"'


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[misc]
    """Documents the token in the OpenAPI schema as an HTTP bearer scheme."""

    target_class = "webapp.api.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "jrl_<key id>_<secret>"}
