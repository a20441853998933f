"""The Django admin for tenants. Every change to a quota, a membership or a token made here
is written to the audit log, as the admin API's changes are."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from tenants.models import ApiToken, AuditLog, Membership, Quota, Tenant
from tenants.services import api_token_revoke, audit_record, member_tokens_revoke


class QuotaInline(admin.StackedInline):
    model = Quota
    can_delete = False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "gpu_hour_price", "job_retention_days", "created_at")
    search_fields = ("slug", "name")
    inlines = [QuotaInline, MembershipInline]

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and "gpu_hour_price" in form.changed_data:  # what estimates charge: audited
            price = {"from": form.initial.get("gpu_hour_price"), "to": form.cleaned_data.get("gpu_hour_price")}
            data = {"gpu_hour_price": {k: None if v is None else str(v) for k, v in price.items()}}
            audit_record(tenant=obj, actor=request.user, action="tenant.price", target=obj.slug, data=data)
        if change and "job_retention_days" in form.changed_data:  # what it deletes: audited
            days = {"from": form.initial.get("job_retention_days"), "to": form.cleaned_data.get("job_retention_days")}
            data = {"job_retention_days": days}
            audit_record(tenant=obj, actor=request.user, action="tenant.retention", target=obj.slug, data=data)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        tenant = form.instance
        audits: list[tuple[str, str, dict[str, Any]]] = []
        leaving: list[Any] = []  # users whose membership goes: their tokens go with it
        for sub in formset.forms:
            if not sub.has_changed() or not sub.is_valid():
                continue
            obj = sub.instance
            if isinstance(obj, Quota):
                data = {f: {"from": sub.initial.get(f), "to": sub.cleaned_data.get(f)} for f in sub.changed_data}
                audits.append(("quota.update", tenant.slug, data))
            elif isinstance(obj, Membership):
                deleted = sub.cleaned_data.get("DELETE", False)
                user = sub.cleaned_data.get("user")
                action = "membership.delete" if deleted else "membership.set"
                audits.append((action, str(user), {"role": sub.cleaned_data.get("role")}))
                if obj.pk and (deleted or "user" in sub.changed_data):
                    leaving.append(sub.initial.get("user"))
        super().save_formset(request, form, formset, change)
        for user in leaving:
            member_tokens_revoke(tenant=tenant, user=user)
        for action, target, data in audits:
            audit_record(tenant=tenant, actor=request.user, action=action, target=target, data=data)


@admin.action(description="Revoke the selected tokens")
def revoke_tokens(modeladmin: Any, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
    for token in queryset.filter(revoked_at__isnull=True).select_related("tenant"):
        api_token_revoke(token=token, actor=request.user)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created through the API or the dashboard (the secret is shown once there);
    here they can be inspected and revoked."""

    list_display = ("name", "key_id", "tenant", "user", "scopes", "expires_at", "revoked_at", "last_used_at")
    list_filter = ("tenant",)
    readonly_fields = ("tenant", "user", "key_id", "secret_hash", "scopes", "created_at", "revoked_at", "last_used_at")
    actions = [revoke_tokens]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(AuditLog)
class AuditLogAdmin(admin.ModelAdmin):
    list_display = ("created_at", "tenant", "actor", "action", "target")
    list_filter = ("action", "tenant")
    readonly_fields = ("tenant", "actor", "action", "target", "data", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
