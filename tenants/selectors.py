"""Reads for tenants."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from tenants.models import ApiToken, Membership, Tenant


def tenants_for_user(*, user: Any) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug")


def tenant_for_user(*, user: Any, slug: str | None) -> tuple[Tenant, str] | None:
    """The tenant ``slug`` (or the user's first) with the user's role, or None."""
    memberships = tenants_for_user(user=user)
    if slug:
        memberships = memberships.filter(tenant__slug=slug)
    m = memberships.first()
    return (m.tenant, m.role) if m else None


def credential_active(*, user: Any, token: ApiToken | None) -> bool:
    """Whether a credential still holds: the token (and its user) or, without one, the user."""
    if token is not None:
        current = ApiToken.objects.filter(pk=token.pk).select_related("user").first()
        return current is not None and current.is_active() and current.user.is_active
    return bool(user is not None and get_user_model().objects.filter(pk=user.pk, is_active=True).exists())
