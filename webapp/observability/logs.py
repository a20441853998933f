"""Logs a person can follow across processes: every record carries the request id and the job
id it concerns, and ``JsonFormatter`` writes one JSON object per line.

The ids live in context variables: the web request sets the request id (``X-Request-ID``) and,
on a job's routes, the job id; every Celery message sent under a request id carries it as a
header, and the worker sets both again around the task (the job id from a job task's first
argument). Engine events stored by the pump are logged under their job's id. So
``request_id == "..."`` finds a job's submission, the admission pass and dispatch it caused and
the engine events that followed, whichever process wrote them, and ``job_id == "..."`` finds a
job's whole life.

Django-free: ``settings.LOGGING`` names the formatter, which installs the record factory.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
from collections.abc import Iterator
from typing import Any

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("jigsaw_request_id", default=None)
job_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("jigsaw_job_id", default=None)

REQUEST_ID_HEADER = "jigsaw_request_id"
"""The Celery message header that carries the request id."""

_base_factory = logging.getLogRecordFactory()


def _record_with_context(*args: Any, **kwargs: Any) -> logging.LogRecord:
    """Every record, from any logger and library, gets the ids current where it was logged."""
    record = _base_factory(*args, **kwargs)
    record.request_id = request_id_var.get()
    record.job_id = job_id_var.get()
    return record


def install_record_factory() -> None:
    if logging.getLogRecordFactory() is not _record_with_context:
        logging.setLogRecordFactory(_record_with_context)


@contextlib.contextmanager
def log_context(*, request_id: str | None = None, job_id: str | None = None) -> Iterator[None]:
    """Set the ids given (the others stay as they are) for the block."""
    tokens = []
    if request_id is not None:
        tokens.append((request_id_var, request_id_var.set(request_id)))
    if job_id is not None:
        tokens.append((job_id_var, job_id_var.set(job_id)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "request_id", "job_id"}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "request_id", "job_id", "process", ...}``: the
    ids are left out when unknown, anything passed as ``extra`` is kept (as text where JSON has
    no type for it), a traceback is a string under ``exc``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        install_record_factory()

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
            "thread": record.threadName,
        }
        for key in ("request_id", "job_id"):
            value = getattr(record, key, None)
            if value:
                entry[key] = value
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)  # what JSON cannot hold, as text


class PlainFormatter(logging.Formatter):
    """The development format, with the ids in brackets when known."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s")
        install_record_factory()

    def format(self, record: logging.LogRecord) -> str:
        ids = [f"{k}={v}" for k in ("request_id", "job_id") if (v := getattr(record, k, None))]
        record.ids = f" [{' '.join(ids)}]" if ids else ""
        return super().format(record)
