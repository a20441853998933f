"""Reads for tenants."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from tenants.models import Membership, Tenant


def tenants_for_user(*, user: Any) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug")


def tenant_for_user(*, user: Any, slug: str | None) -> tuple[Tenant, str] | None:
    """The tenant ``slug`` (or the user's first) with the user's role, or None."""
    memberships = tenants_for_user(user=user)
    if slug:
        memberships = memberships.filter(tenant__slug=slug)
    m = memberships.first()
    return (m.tenant, m.role) if m else None
