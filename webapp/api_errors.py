"""One error shape for the whole API: ``{"error": {"code", "message", "details"}}``.

``details`` is a list of ``{"field": "spec.rollout.n", "message": "..."}`` with dotted paths.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from webapp.jobs.errors import ServiceError


def error_body(code: str, message: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or []}}


def _flatten(detail: Any, path: str = "") -> list[dict[str, Any]]:
    if isinstance(detail, dict):
        out: list[dict[str, Any]] = []
        for key, value in detail.items():
            if isinstance(key, int):  # list items (ListField errors come keyed by index)
                out.extend(_flatten(value, f"{path}[{key}]"))
                continue
            sub = str(key) if key != "non_field_errors" else ""
            out.extend(_flatten(value, f"{path}.{sub}" if path and sub else (sub or path)))
        return out
    if isinstance(detail, list):
        if all(not isinstance(v, dict | list) for v in detail):
            return [{"field": path or "<body>", "message": str(v)} for v in detail]
        out = []
        for i, value in enumerate(detail):
            out.extend(_flatten(value, f"{path}[{i}]"))
        return out
    return [{"field": path or "<body>", "message": str(detail)}]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ServiceError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.http_status)
    if isinstance(exc, Http404 | exceptions.NotFound):
        return Response(error_body("not_found", "no such resource"), status=status.HTTP_404_NOT_FOUND)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("validation_error", "the request is invalid", _flatten(exc.detail))
    else:
        code = getattr(exc, "default_code", "error")
        detail = getattr(exc, "detail", str(exc))
        response.data = error_body(str(code), str(detail))
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            response["Retry-After"] = str(int(exc.wait) + 1)
    return response
