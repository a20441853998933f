from django.contrib import admin

from webapp.jobs.models import Job, JobEvent


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("name", "tenant", "status", "current_step", "total_steps", "num_gpus", "created_at")
    list_filter = ("status", "tenant")
    search_fields = ("name", "id")
    readonly_fields = ("spec", "resolved_spec", "last_event_seq")


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ("job", "seq", "kind", "created_at")
    list_filter = ("kind",)
