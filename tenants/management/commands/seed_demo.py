"""Seed the demo: an admin, two tenants with quotas, their owners, and one API token each.

Re-running is safe: existing rows are kept, passwords are reset to the ones printed now, and
fresh tokens are issued (a token's secret is only ever shown when it is created).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from tenants.models import Role, Tenant
from tenants.services import api_token_create, membership_add, quota_update, tenant_create

TENANTS = {"acme": ("Acme Research", "alice"), "globex": ("Globex Labs", "bob")}


def demo_quota() -> dict[str, Any]:
    """Each tenant is guaranteed half the engine's cluster and may borrow a quarter more."""
    devices = settings.ENGINE_CLUSTER["num_nodes"] * settings.ENGINE_CLUSTER["devices_per_node"]
    half = max(1, devices // 2)
    return {
        "guaranteed_gpus": {settings.ENGINE_CLUSTER["device_type"]: half},
        "borrow_limit_gpus": max(1, devices // 4),
        "max_running_jobs": 3,
        "max_gpus_per_job": half,
    }


class Command(BaseCommand):
    help = "Create the demo's admin, tenants, users and API tokens; print the credentials once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="print credentials as JSON")
        parser.add_argument("--admin-password", default="", help="default: a random one, printed")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        creds: dict[str, Any] = {"users": {}, "tokens": {}}
        admin, _ = users.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        admin_password = options["admin_password"] or secrets.token_urlsafe(9)
        admin.set_password(admin_password)
        admin.save()
        creds["users"]["admin"] = admin_password
        for slug, (name, owner_name) in TENANTS.items():
            tenant = Tenant.objects.filter(slug=slug).first() or tenant_create(
                slug=slug, name=name, actor=admin, quota=demo_quota()
            )
            quota_update(tenant=tenant, changes=demo_quota(), actor=admin)  # this run's cluster
            owner, _ = users.objects.get_or_create(username=owner_name)
            password = secrets.token_urlsafe(9)
            owner.set_password(password)
            owner.save()
            creds["users"][owner_name] = password
            membership_add(tenant=tenant, user=owner, role=Role.OWNER, actor=admin)
            membership_add(tenant=tenant, user=admin, role=Role.OWNER, actor=admin)
            _, raw = api_token_create(tenant=tenant, user=owner, name="demo")
            creds["tokens"][slug] = raw
        # alice can also watch globex's jobs: the dashboard's tenant switcher has two entries.
        membership_add(
            tenant=Tenant.objects.get(slug="globex"),
            user=users.objects.get(username="alice"),
            role=Role.VIEWER,
            actor=admin,
        )
        if options["json"]:
            self.stdout.write(json.dumps(creds))
            return
        for user, password in creds["users"].items():
            self.stdout.write(f"user {user:8s} password {password}")
        for slug, token in creds["tokens"].items():
            self.stdout.write(f"token {slug:8s} {token}")
