"""The request id travels with every Celery message sent under one (a header), and a worker
runs each task under it and, for a job's task, under the job's id (``logs``).

Imported by ``webapp.jobs.tasks`` (loaded by the web processes that send and the workers that
run), which connects the receivers."""

from __future__ import annotations

from typing import Any

from celery.signals import before_task_publish, task_postrun, task_prerun

from webapp.observability.logs import REQUEST_ID_HEADER, job_id_var, request_id_var

JOB_TASKS = frozenset({"jobs.dispatch_job", "jobs.cancel_job", "jobs.pause_job"})
"""Tasks whose first argument is the job's id."""

_tokens: dict[str, list[tuple[Any, Any]]] = {}
"""Per running task id, the context to restore when it ends."""


@before_task_publish.connect
def _send_request_id(headers: dict[str, Any] | None = None, **_: object) -> None:
    request_id = request_id_var.get()
    if request_id and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


@task_prerun.connect
def _enter_task_context(task_id: str = "", task: Any = None, args: Any = None, **_: object) -> None:
    tokens = []
    request_id = getattr(getattr(task, "request", None), REQUEST_ID_HEADER, None)
    if request_id:
        tokens.append((request_id_var, request_id_var.set(str(request_id))))
    if getattr(task, "name", None) in JOB_TASKS and args:
        tokens.append((job_id_var, job_id_var.set(str(args[0]))))
    _tokens[task_id] = tokens


@task_postrun.connect
def _leave_task_context(task_id: str = "", **_: object) -> None:
    for var, token in reversed(_tokens.pop(task_id, [])):
        try:
            var.reset(token)
        except ValueError:  # set in another context (an eager task inside its caller's)
            var.set(None)
