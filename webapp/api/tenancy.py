"""Tenant resolution and scope checks for every tenant-facing API view (fails closed).

The tenant comes from the API token (a token belongs to one tenant) or, for a browser
session, from the ``X-Tenant`` header among the user's memberships (default: the first).
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, permissions

from tenants.models import ApiToken, Scope, Tenant, implied_scopes, role_scopes
from tenants.selectors import tenant_for_user

READ_SCOPE = "jobs:read"
WRITE_SCOPE = "jobs:write"


def resolve_tenant(request: Any) -> tuple[Tenant, str, list[str]]:
    """(tenant, role, scopes) for this request, or PermissionDenied. A signed-in user holds
    their role's scopes; a token holds its own, but never more than its user's role grants
    now (a token outlives a demotion)."""
    cached = getattr(request, "_jigsaw_tenant", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    token = request.auth if isinstance(request.auth, ApiToken) else None
    if token is not None:
        # Every token reaches here through api_token_authenticate, which reads the role in the
        # same query (None once the user left the tenant).
        if token.member_role is None:
            raise exceptions.PermissionDenied("this token's user is no longer a member of its tenant")
        tenant, role = token.tenant, token.member_role
        held = implied_scopes(token.scopes) & role_scopes(role=role, staff=token.user.is_staff)
    else:
        found = tenant_for_user(user=request.user, slug=request.headers.get("X-Tenant"))
        if found is None:
            raise exceptions.PermissionDenied("you are not a member of this tenant (X-Tenant)")
        tenant, role = found
        held = role_scopes(role=role, staff=request.user.is_staff)
    result = (tenant, role, [s for s in Scope.values if s in held])
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
        if needed in scopes:
            return True
        self.message = f"this token or role lacks the {needed} scope this request needs"
        return False


class TenantMember(permissions.BasePermission):
    """Authenticated and resolved to a tenant, whatever its scopes: for a view that judges the
    scopes itself (creating a key names, refuses and audits what the caller lacks)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        resolve_tenant(request)
        return True


def credential_name(request: Any) -> str:
    """The caller's credential in words, for refusals and the audit log."""
    if isinstance(request.auth, ApiToken):
        return f"this token ({request.auth.key_id})"
    if request.user.is_staff:
        return "a staff account"
    _, role, _ = resolve_tenant(request)
    return f"the {role} role"
