from django.contrib import admin

from webapp.jobs.models import Job, JobCheckpoint, JobEvent, TenantShare, UsageRecord


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("name", "tenant", "status", "current_step", "total_steps", "num_gpus", "priority", "created_at")
    list_filter = ("status", "tenant", "borrowed")
    search_fields = ("name", "id")
    readonly_fields = ("spec", "resolved_spec", "last_event_seq", "gpu_seconds", "attempt", "admitted_at")


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ("job", "seq", "kind", "created_at")
    list_filter = ("kind",)


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    """The ledger is append-only: read here, written only by event ingestion."""

    list_display = ("created_at", "tenant", "job", "device_type", "gpu_seconds", "step")
    list_filter = ("tenant", "device_type")

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(JobCheckpoint)
class JobCheckpointAdmin(admin.ModelAdmin):
    list_display = ("job", "step", "created_at")


@admin.register(TenantShare)
class TenantShareAdmin(admin.ModelAdmin):
    list_display = ("tenant", "decayed_gpu_seconds", "updated_at")
