"""Celery task failures and retries, counted in the worker process that ran the task.

Imported by ``webapp.jobs.tasks`` (loaded in every worker), which connects the receivers."""

from __future__ import annotations

from typing import Any

from celery.signals import task_failure, task_retry, worker_process_shutdown

from webapp.observability.metrics import CELERY_TASK_FAILURES, CELERY_TASK_RETRIES, MULTIPROCESS, process_identity


def _task_name(sender: Any) -> str:
    return str(getattr(sender, "name", None) or "unknown")


@task_failure.connect
def _count_failure(sender: Any = None, **_: object) -> None:
    CELERY_TASK_FAILURES.labels(_task_name(sender)).inc()


@task_retry.connect
def _count_retry(sender: Any = None, **_: object) -> None:
    CELERY_TASK_RETRIES.labels(_task_name(sender)).inc()


@worker_process_shutdown.connect
def _drop_live_gauges(**_: object) -> None:
    """A pool process that ends takes its live gauges with it (they would count forever)."""
    if MULTIPROCESS:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(process_identity())
