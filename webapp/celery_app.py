"""The Celery app: short, idempotent tasks that take ids (``webapp.jobs.tasks``)."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.fixups.django import DjangoFixup
from celery.signals import task_postrun, task_prerun, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("jigsawrl")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["webapp.jobs"])

POOL_KEPT_FOR_TASKS = 1000
"""A prefork pool process closes and reopens its database connection pool once per this many
tasks (``_keep_the_connection_pool``)."""


@worker_process_init.connect
def _freeze_startup_heap(**_: object) -> None:
    """Each pool process leaves start-up's objects out of full collections (``webapp/gc_tuning.py``)."""
    from webapp.gc_tuning import freeze_startup_heap

    freeze_startup_heap()


@worker_process_init.connect
def _keep_the_connection_pool(**_: object) -> None:
    """In a worker's task-running process: keep the database connection pool across tasks.

    Celery's Django fixup closes a prefork process's whole connection pool before and after every
    task (``close_pool`` unless ``db_reuse_max`` is set), so each task opened the pool's minimum
    of connections again: about five PostgreSQL sessions a task. The signal fires in each prefork
    child and once in a solo worker's process, and both run one task at a time on one thread for
    the life of the process, so the pool is kept there and each task hands its connection back to
    it instead, as Django does after a request.

    With reuse on, the fixup no longer closes connections when a further worker starts in the
    same process; only tests do that (``tests/django_fixtures.py`` hands the starting thread's
    connections back first, or the fixup would close the descriptors under them).
    """
    for fixup in app._fixups:  # Celery keeps no public handle on its fixups
        if isinstance(fixup, DjangoFixup):
            fixup.worker_fixup.db_reuse_max = POOL_KEPT_FOR_TASKS
    task_prerun.connect(_hand_connections_back, weak=False)
    task_postrun.connect(_hand_connections_back, weak=False)


def _hand_connections_back(sender: Any = None, **_: object) -> None:
    """Around each task: its connection goes back to the pool, or is dropped if it broke (a
    PostgreSQL restart) so the next task takes a checked one. An eager task runs inside its
    caller, whose connection and transaction are not its to hand back."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
