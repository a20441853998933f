"""Tenant, membership, API tokens, quota and the audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Tenant(models.Model):
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    gpu_hour_price = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="What one GPU-hour costs this tenant (estimates); empty: the service's GPU_HOUR_PRICE.",
    )
    job_retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Ended jobs older than this many days are deleted with their checkpoints "
        "(the usage ledger is kept); empty: jobs are kept until deleted.",
    )

    def __str__(self) -> str:
        return self.slug


class Role(models.TextChoices):
    OWNER = "owner"
    MEMBER = "member"
    VIEWER = "viewer"


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


class Scope(models.TextChoices):
    JOBS_READ = "jobs:read"
    JOBS_WRITE = "jobs:write"
    ADMIN = "admin"


EVERY_SCOPE = frozenset(Scope.values)
ROLE_SCOPES: dict[str, frozenset[str]] = {
    Role.OWNER.value: EVERY_SCOPE,
    Role.MEMBER.value: frozenset({Scope.JOBS_READ.value, Scope.JOBS_WRITE.value}),
    Role.VIEWER.value: frozenset({Scope.JOBS_READ.value}),
}


def role_scopes(*, role: str | None, staff: bool) -> frozenset[str]:
    """What a user may do in a tenant signed in, and so the most any of their tokens for it
    may: their role's scopes, every scope for staff (they run the cluster), none once they
    left the tenant."""
    if role is None:
        return frozenset()
    return EVERY_SCOPE if staff else ROLE_SCOPES[role]


def implied_scopes(scopes: list[str] | frozenset[str]) -> frozenset[str]:
    """A token's scopes with what they imply: ``admin`` stands for every scope."""
    held = frozenset(scopes)
    return EVERY_SCOPE if Scope.ADMIN.value in held else held


class ApiToken(models.Model):
    """A secret shown once: stored as a public key id plus a SHA-256 of the secret.

    The secret is 256 random bits, so a fast hash is enough: there is nothing to brute-force
    that a slow hash would protect (unlike passwords).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key_id = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.key_id})"

    def is_active(self, now: timezone.datetime | None = None) -> bool:
        now = now or timezone.now()
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > now


class BudgetAction(models.TextChoices):
    BLOCK = "block", "block new jobs"
    PAUSE = "pause", "pause running jobs and block new ones"


QUOTA_DECISIONS_LOCK_KEY = 0x4A5247_01
"""Postgres advisory lock held by an admission pass and by a quota edit: passes read quotas
without row locks (a submit, which locks its tenant's quota row, never waits for a pass), and
an edit cannot land in the middle of one."""


class Quota(models.Model):
    """What a tenant may use. GPU counts are per device type (``{"h100": 8}``): a guarantee on
    one type says nothing about another."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="quota")
    guaranteed_gpus = models.JSONField(
        default=dict, blank=True, help_text='GPUs always available to this tenant, by device type: {"h100": 8}.'
    )
    borrow_limit_gpus = models.PositiveIntegerField(
        default=8,
        help_text="GPUs beyond the guarantee this tenant may borrow while others leave them idle "
        "(a new tenant has no guarantee, so this is all it can use).",
    )
    max_running_jobs = models.PositiveIntegerField(default=4)
    max_queued_jobs = models.PositiveIntegerField(default=20)
    max_gpus_per_job = models.PositiveIntegerField(default=8)
    monthly_gpu_hours = models.FloatField(default=1000.0)
    budget_action = models.CharField(max_length=8, choices=BudgetAction.choices, default=BudgetAction.BLOCK)
    priority_limit = models.FloatField(default=1.0, help_text="The highest job priority this tenant may ask for.")
    fair_share_weight = models.FloatField(default=1.0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"quota of {self.tenant}"

    def guaranteed_for(self, device_type: str) -> int:
        return int((self.guaranteed_gpus or {}).get(device_type, 0))


class AuditLog(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="audit_log", null=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=200)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
