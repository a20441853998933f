"""Writes for tenants: every change to tokens, memberships and quotas leaves an audit row."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from tenants.models import QUOTA_DECISIONS_LOCK_KEY, ApiToken, AuditLog, Membership, Quota, Role, Scope, Tenant

TOKEN_PREFIX = "jrl"
ALL_SCOPES = [s.value for s in Scope]


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def audit_record(
    *, tenant: Tenant | None, actor: Any, action: str, target: str, data: dict[str, Any] | None = None
) -> None:
    AuditLog.objects.create(
        tenant=tenant,
        actor=actor if getattr(actor, "pk", None) else None,
        action=action,
        target=target,
        data=data or {},
    )


@transaction.atomic
def tenant_create(*, slug: str, name: str, actor: Any = None, quota: dict[str, Any] | None = None) -> Tenant:
    tenant = Tenant.objects.create(slug=slug, name=name)
    Quota.objects.create(tenant=tenant, **(quota or {}))
    audit_record(tenant=tenant, actor=actor, action="tenant.create", target=slug, data={"quota": quota or {}})
    return tenant


@transaction.atomic
def membership_add(*, tenant: Tenant, user: AbstractBaseUser, role: str = Role.MEMBER, actor: Any = None) -> Membership:
    membership, _ = Membership.objects.update_or_create(tenant=tenant, user=user, defaults={"role": role})
    audit_record(tenant=tenant, actor=actor, action="membership.set", target=str(user), data={"role": role})
    return membership


@transaction.atomic
def membership_remove(*, tenant: Tenant, user: AbstractBaseUser, actor: Any = None) -> bool:
    """Remove ``user`` from ``tenant``; their tokens for it are revoked with them."""
    deleted, _ = Membership.objects.filter(tenant=tenant, user=user).delete()
    if deleted:
        member_tokens_revoke(tenant=tenant, user=user)
        audit_record(tenant=tenant, actor=actor, action="membership.delete", target=str(user))
    return bool(deleted)


def member_tokens_revoke(*, tenant: Tenant, user: Any) -> None:
    """Revoke ``user``'s tokens for ``tenant``: they leave it with the user."""
    ApiToken.objects.filter(tenant=tenant, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())


class ScopesNotHeld(Exception):
    """A key asked for what its creator's credential does not hold."""

    def __init__(self, message: str, details: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


@transaction.atomic
def api_token_create(
    *,
    tenant: Tenant,
    user: AbstractBaseUser,
    name: str,
    scopes: Iterable[str] = ("jobs:read", "jobs:write"),
    expires_at: datetime | None = None,
) -> tuple[ApiToken, str]:
    """Create a token; returns it with the raw secret, which is never stored or shown again."""
    scopes = list(scopes)
    unknown = [s for s in scopes if s not in ALL_SCOPES]
    if unknown:
        raise ValueError(f"scopes: unknown {unknown}; known: {ALL_SCOPES}")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        tenant=tenant,
        user=user,
        name=name,
        key_id=key_id,
        secret_hash=_hash_secret(secret),
        scopes=scopes,
        expires_at=expires_at,
    )
    audit_record(
        tenant=tenant, actor=user, action="api_token.create", target=key_id, data={"name": name, "scopes": scopes}
    )
    return token, f"{TOKEN_PREFIX}_{key_id}_{secret}"


def api_key_issue(
    *,
    tenant: Tenant,
    user: AbstractBaseUser,
    name: str,
    scopes: Iterable[str],
    expires_at: datetime | None,
    held: Iterable[str],
    credential: str,
) -> tuple[ApiToken, str]:
    """A key for a caller whose credential (``credential`` names it: a token or a role) holds
    ``held``: creating one is a write, and the key gets at most what the caller holds. A
    refusal is audited, then raised as ScopesNotHeld."""
    wanted, holds = list(dict.fromkeys(scopes)), set(held)
    beyond = [(i, s) for i, s in enumerate(wanted) if s not in holds]
    if beyond:
        names = ", ".join(s for _, s in beyond)
        message = f"{credential} does not hold {names}: a key gets at most its creator's scopes"
        details = [{"field": f"scopes[{i}]", "message": f"{s}: not held by {credential}"} for i, s in beyond]
    elif Scope.JOBS_WRITE.value not in holds:
        message = f"{credential} lacks the {Scope.JOBS_WRITE.value} scope creating a key needs"
        details = [{"field": "scopes", "message": message}]
    else:
        return api_token_create(tenant=tenant, user=user, name=name, scopes=wanted, expires_at=expires_at)
    audit_record(
        tenant=tenant,
        actor=user,
        action="api_token.refuse",
        target=name,
        data={"scopes": wanted, "held": sorted(holds), "credential": credential},
    )
    raise ScopesNotHeld(message, details)


def token_member_role() -> Subquery:
    """The role of a token's user in the token's tenant (None once they left it)."""
    member = Membership.objects.filter(tenant_id=OuterRef("tenant_id"), user_id=OuterRef("user_id"))
    return Subquery(member.values("role")[:1])


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """The active token for ``raw`` or None; compares in constant time."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    try:
        token = (
            ApiToken.objects.select_related("tenant", "user")
            .annotate(member_role=token_member_role())  # resolving the tenant needs it: same query
            .get(key_id=parts[1])
        )
    except ApiToken.DoesNotExist:
        return None
    if not hmac.compare_digest(token.secret_hash, _hash_secret(parts[2])):
        return None
    if not token.is_active() or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)  # at most once a minute
    return token


@transaction.atomic
def api_token_revoke(*, token: ApiToken, actor: Any) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    audit_record(tenant=token.tenant, actor=actor, action="api_token.revoke", target=token.key_id)


QUOTA_FIELDS = (
    "guaranteed_gpus",
    "borrow_limit_gpus",
    "max_running_jobs",
    "max_queued_jobs",
    "max_gpus_per_job",
    "monthly_gpu_hours",
    "budget_action",
    "priority_limit",
    "fair_share_weight",
)


def quota_as_dict(quota: Quota) -> dict[str, Any]:
    return {name: getattr(quota, name) for name in QUOTA_FIELDS}


@transaction.atomic
def quota_update(*, tenant: Tenant, changes: dict[str, Any], actor: Any) -> Quota:
    """Apply validated ``changes`` between admission passes (under their advisory lock) and
    under the quota's row lock (submits check it), and audit what changed from what to what."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [QUOTA_DECISIONS_LOCK_KEY])
    quota, _ = Quota.objects.select_for_update().get_or_create(tenant=tenant)
    before = quota_as_dict(quota)
    for name, value in changes.items():
        if name not in QUOTA_FIELDS:
            raise ValueError(f"{name}: not a quota field; one of {', '.join(QUOTA_FIELDS)}")
        setattr(quota, name, value)
    quota.save()
    after = quota_as_dict(quota)
    changed = {k: {"from": before[k], "to": after[k]} for k in QUOTA_FIELDS if before[k] != after[k]}
    if changed:
        audit_record(tenant=tenant, actor=actor, action="quota.update", target=tenant.slug, data=changed)
    return quota
