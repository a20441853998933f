from django.contrib import admin

from tenants.models import ApiToken, AuditLog, Membership, Quota, Tenant


class QuotaInline(admin.StackedInline):
    model = Quota


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    inlines = [QuotaInline, MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "key_id", "tenant", "user", "scopes", "expires_at", "revoked_at", "last_used_at")
    list_filter = ("tenant",)
    readonly_fields = ("key_id", "secret_hash", "last_used_at")


@admin.register(AuditLog)
class AuditLogAdmin(admin.ModelAdmin):
    list_display = ("created_at", "tenant", "actor", "action", "target")
    list_filter = ("action", "tenant")
    readonly_fields = ("tenant", "actor", "action", "target", "data", "created_at")
