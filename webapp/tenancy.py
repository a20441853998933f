"""Tenant resolution and scope checks for every tenant-facing API view (fails closed).

The tenant comes from the API token (a token belongs to one tenant) or, for a browser
session, from the ``X-Tenant`` header among the user's memberships (default: the first).
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, permissions

from tenants.models import ApiToken, Role, Tenant
from tenants.selectors import tenant_for_user

READ_SCOPE = "jobs:read"
WRITE_SCOPE = "jobs:write"


def resolve_tenant(request: Any) -> tuple[Tenant, str, list[str]]:
    """(tenant, role, scopes) for this request, or PermissionDenied."""
    cached = getattr(request, "_jigsaw_tenant", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    token = request.auth if isinstance(request.auth, ApiToken) else None
    if token is not None:
        # Every token reaches here through api_token_authenticate, which reads the role in the
        # same query (None once the user left the tenant).
        role = token.member_role or Role.VIEWER
        result = (token.tenant, role, list(token.scopes))
    else:
        found = tenant_for_user(user=request.user, slug=request.headers.get("X-Tenant"))
        if found is None:
            raise exceptions.PermissionDenied("you are not a member of this tenant (X-Tenant)")
        tenant, role = found
        scopes = [READ_SCOPE] if role == Role.VIEWER else [READ_SCOPE, WRITE_SCOPE]
        result = (tenant, role, scopes)
    request._jigsaw_tenant = result
    return result


class TenantScoped(permissions.BasePermission):
    """Authenticated, resolved to a tenant, and holding the scope the method needs."""

    message = "this token or role lacks the scope this request needs"

    def has_permission(self, request: Any, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        _, _, scopes = resolve_tenant(request)
        needed = READ_SCOPE if request.method in permissions.SAFE_METHODS else WRITE_SCOPE
        return needed in scopes or "admin" in scopes
