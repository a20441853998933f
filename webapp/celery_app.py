"""The Celery app: short, idempotent tasks that take ids (``webapp.jobs.tasks``)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("jigsawrl")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["webapp.jobs"])


@worker_process_init.connect
def _freeze_startup_heap(**_: object) -> None:
    """Each pool process leaves start-up's objects out of full collections (``webapp/gc_tuning.py``)."""
    from webapp.gc_tuning import freeze_startup_heap

    freeze_startup_heap()
