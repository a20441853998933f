"""One error shape for the whole API: ``{"error": {"code", "message", "details"}}``.

``details`` is a list of ``{"field": "spec.rollout.n", "message": "..."}`` with dotted paths.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler

from tenants.services import ScopesNotHeld
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
    request = context.get("request")
    renderer = getattr(request, "accepted_renderer", None)
    if renderer is not None and renderer.format not in ("json", "api"):
        # An error is JSON even where the client asked for a CSV export (the schema says so).
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"  # type: ignore[union-attr]
    if isinstance(exc, ServiceError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.http_status)
    if isinstance(exc, ScopesNotHeld):
        return Response(error_body("permission_denied", exc.message, exc.details), status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, Http404 | exceptions.NotFound):
        return Response(error_body("not_found", "no such resource"), status=status.HTTP_404_NOT_FOUND)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("validation_error", "the request is invalid", _flatten(exc.detail))
    elif isinstance(exc, exceptions.ParseError):
        field = getattr(exc, "field", "<body>")  # webapp.api.parsers.BodyInvalid names one
        response.data = error_body("parse_error", str(exc.detail), [{"field": field, "message": str(exc.detail)}])
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        response.data = error_body(
            "unsupported_media_type",
            str(exc.detail),
            [{"field": "Content-Type", "message": "send application/json (dataset uploads also take multipart)"}],
        )
    else:
        code = getattr(exc, "default_code", "error")
        detail = getattr(exc, "detail", str(exc))
        response.data = error_body(str(code), str(detail))
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            response["Retry-After"] = str(int(exc.wait) + 1)
    return response


# -- errors Django answers before a view (no URL matched, a refused request, a crash) -----------
REQUEST_ID_HEADER = "X-Request-ID"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
logger = logging.getLogger("webapp.api")


def _api_path(request: HttpRequest) -> bool:
    return request.path == "/api" or request.path.startswith("/api/")


def request_id(request: HttpRequest) -> str:
    """This request's id: the caller's ``X-Request-ID`` when it sends a plausible one (a proxy
    in front may set it), else a new one. Responses carry it, and logs name it."""
    found = getattr(request, "request_id", None)
    if found is None:
        sent = request.headers.get(REQUEST_ID_HEADER, "")
        found = sent if _SANE_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        request.request_id = found  # type: ignore[attr-defined]
    return str(found)


def server_error_body(request: HttpRequest) -> dict[str, Any]:
    rid = request_id(request)
    return error_body(
        "server_error",
        f"the server failed on this request; it was logged with request id {rid}",
        [{"field": REQUEST_ID_HEADER, "message": rid}],
    )


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: API clients get the one error shape, pages keep Django's page."""
    if _api_path(request):
        return JsonResponse(error_body("not_found", f"no such resource: {request.path}"), status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: requests Django itself refuses (a bad Host header, too many fields)."""
    if _api_path(request):
        return JsonResponse(error_body("bad_request", "the request is malformed"), status=400)
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _api_path(request):
        return JsonResponse(server_error_body(request), status=500)
    return defaults.server_error(request)


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase.lower()
    except ValueError:
        return f"HTTP {code}"


def _as_error_shape(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """An error page Django made for an API path (a debug page when DEBUG is on), answered in
    the one error shape with the same status."""
    code = response.status_code
    if code == 404:
        return not_found(request, Http404())
    if code >= 500:
        body = server_error_body(request)
    elif code == 405:
        body = error_body("method_not_allowed", f"{request.method} is not allowed on {request.path}")
    elif code == 403:
        body = error_body("permission_denied", "you may not do this")
    elif code == 400:
        body = error_body("bad_request", "the request is malformed")
    else:
        body = error_body("error", _phrase(code))
    answer = JsonResponse(body, status=code)
    for header in ("Allow", "Retry-After", "WWW-Authenticate"):
        if header in response:
            answer[header] = response[header]
    return answer


class ApiErrorMiddleware:
    """The outermost middleware. Every response carries its request's id (``X-Request-ID``),
    and under /api/ every error is in the one error shape whatever DEBUG says: Django's debug
    pages list the URL patterns and show tracebacks, so they are for pages only. A view's
    crash is logged with its traceback and request id; the client gets only the id."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = request_id(request)
        response = self.get_response(request)
        if _api_path(request) and response.status_code >= 400:
            if response.status_code == 500 and not getattr(request, "_crash_logged", False):
                # Raised outside a view: Django logged the traceback (without our id) just before.
                logger.error("request %s: %s %s answered 500", rid, request.method, request.path)
            if not response.get("Content-Type", "").startswith("application/json") and not isinstance(
                response, Response
            ):
                response = _as_error_shape(request, response)
        response[REQUEST_ID_HEADER] = rid
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _api_path(request) or isinstance(exception, _DJANGO_ANSWERS):
            return None  # Django answers these with their own status; __call__ reshapes the page
        logger.error("request %s: %s %s failed", request_id(request), request.method, request.path, exc_info=exception)
        request._crash_logged = True  # type: ignore[attr-defined]
        return JsonResponse(server_error_body(request), status=500)


# Exceptions Django turns into a 4xx response of its own (django.core.handlers.exception).
_DJANGO_ANSWERS = (Http404, DjangoPermissionDenied, SuspiciousOperation, BadRequest, MultiPartParserError)


# -- the schema documents the shape ----------------------------------------------------------
_ERROR_SCHEMAS = {
    "ErrorFieldDetail": {
        "type": "object",
        "properties": {
            "field": {"type": "string", "description": 'Dotted path ("spec.rollout.n"), a header, or "<body>".'},
            "message": {"type": "string"},
        },
        "required": ["field", "message"],
    },
    "ErrorBody": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Stable, machine-readable: validation_error, not_found, ..."},
            "message": {"type": "string"},
            "details": {"type": "array", "items": {"$ref": "#/components/schemas/ErrorFieldDetail"}},
        },
        "required": ["code", "message", "details"],
    },
    "ErrorResponse": {
        "type": "object",
        "properties": {"error": {"$ref": "#/components/schemas/ErrorBody"}},
        "required": ["error"],
    },
}


def document_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: every operation may answer any 4XX in the one
    error shape (429 with Retry-After, 413 past the body limit, ...), so clients and schema
    checks know the body of a refusal too."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(_ERROR_SCHEMAS)
    refusal = {
        "description": "Refused: the body says why and which field (see ErrorResponse).",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    }
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            operation.setdefault("responses", {}).setdefault("4XX", refusal)
    return result
