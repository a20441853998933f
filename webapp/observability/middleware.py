"""Request latency by route: the URL pattern's name, never the raw path (ids in paths would make
a time series per job)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

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
