from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "webapp.jobs"
    label = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the tasks in every process: ``task_queue`` sends them by name from the
        # registry (Celery's own discovery runs in workers only).
        from webapp.jobs import tasks  # noqa: F401
