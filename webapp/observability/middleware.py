"""Per request: its latency by route (the URL pattern's name, never the raw path: ids in paths
would make a time series per job), and the ids its log lines carry."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from webapp.api.errors import request_id
from webapp.observability.logs import job_id_var, log_context
from webapp.observability.metrics import HTTP_REQUEST_SECONDS, method_label

UNMATCHED = "<unmatched>"
"""Requests no URL pattern took: 404s, static files served by WhiteNoise."""


def route_of(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return UNMATCHED
    return match.view_name or match.route or UNMATCHED


class RequestMetricsMiddleware:
    """Outermost, so that the time and status are those the client gets."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        HTTP_REQUEST_SECONDS.labels(route_of(request), method_label(request.method), str(response.status_code)).observe(
            time.perf_counter() - started
        )
        return response


_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
request_logger = logging.getLogger("webapp.requests")


class RequestContextMiddleware:
    """Runs the request under its id (``X-Request-ID``) and, on a job's routes, the job's id, so
    that every log line it causes names them (``logs``), and logs one line per request: writes
    and refusals at INFO, reads at DEBUG. A job created here is named from the response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        outer_job_id = job_id_var.get()
        with log_context(request_id=request_id(request)):
            try:
                response = self.get_response(request)
                with log_context(job_id=_created_job_id(request, response)):
                    self._log(request, response, time.perf_counter() - started)
            finally:
                # process_view may have set it, maybe in another thread's copy of the context
                # that Django's sync/async adapters copy back: set, not reset by token.
                job_id_var.set(outer_job_id)
        return response

    @staticmethod
    def _log(request: HttpRequest, response: HttpResponse, seconds: float) -> None:
        level = logging.INFO if request.method in _WRITES or response.status_code >= 400 else logging.DEBUG
        request_logger.log(
            level,
            "%s %s %s",
            request.method,
            request.path,
            response.status_code,
            extra={"route": route_of(request), "status": response.status_code, "duration_ms": round(seconds * 1000, 1)},
        )

    def process_view(
        self, request: HttpRequest, view_func: object, view_args: object, view_kwargs: dict[str, object]
    ) -> None:
        match = getattr(request, "resolver_match", None)
        job_id = view_kwargs.get("pk")
        if match is not None and str(match.url_name or "").startswith("job") and job_id:
            job_id_var.set(str(job_id))


def _created_job_id(request: HttpRequest, response: HttpResponse) -> str | None:
    """The id of a job this request created (a submit or a clone answers 201 with it)."""
    if response.status_code != 201 or not route_of(request).startswith("job"):
        return None
    data = getattr(response, "data", None)
    return str(data["id"]) if isinstance(data, dict) and data.get("id") else None
