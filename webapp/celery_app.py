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
tasks (see ``_keep_the_connection_pool``)."""


@worker_process_init.connect
def _freeze_startup_heap(**_: object) -> None:
    """Each pool process leaves start-up's objects out of full collections (``webapp/gc_tuning.py``)."""
    from webapp.gc_tuning import freeze_startup_heap

    freeze_startup_heap()


@worker_process_init.connect
def _keep_the_connection_pool(**_: object) -> None:
    """Celery's Django fixup closes a prefork pool process's connection pool before and after
    every task unless connection reuse is on: 5 new PostgreSQL sessions per task (the pool's
    minimum and one more), about 67 a second in the control-plane soak. Reuse is turned on here,
    in pool processes only (they run one task at a time on one thread); a worker running in a
    thread of a process that has other connections (the tests') keeps Celery's default."""
    for fixup in app._fixups:  # Celery keeps no public handle on its fixups
        if isinstance(fixup, DjangoFixup):
            fixup.worker_fixup.db_reuse_max = POOL_KEPT_FOR_TASKS


@task_prerun.connect
@task_postrun.connect
def _return_connections(sender: Any = None, **_: object) -> None:
    """Around every task a worker runs, as Django does around every request: a connection goes
    back to the process's pool, or is dropped if it broke (a PostgreSQL restart) so the next task
    gets a fresh one. The pool itself stays open (``_keep_the_connection_pool``). An eager
    task (standalone mode) runs inside its caller, whose connection and transaction are not its
    to hand back, as Celery's own fixup leaves them."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
