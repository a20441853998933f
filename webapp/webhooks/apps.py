from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webapp.webhooks"
    label = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the tasks in every process: ``task_queue`` sends them by name.
        from webapp.jobs.journal import job_events_journaled
        from webapp.webhooks import tasks  # noqa: F401
        from webapp.webhooks.outbox import enqueue_deliveries

        # Deliveries are written in the transaction that writes the events: both or neither.
        job_events_journaled.connect(enqueue_deliveries, dispatch_uid="webhooks.enqueue_deliveries")
