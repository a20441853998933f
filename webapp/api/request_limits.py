"""Refusals made before a view runs, in the API's one error shape:

- a body larger than the view allows: 413 from its ``Content-Length``, before a byte of it is
  parsed (DRF would read any size, and a multipart body would be spooled to disk). A view may
  allow more with a ``max_body_bytes()`` static method (dataset uploads do); every other API
  view allows ``API_MAX_BODY_BYTES``;
- a NUL character in the path or the query string: 400. No name, id or filter holds one, and
  Postgres refuses them in text, so a lookup with one would fail as a server error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from webapp.api.errors import error_body

DEFAULT_MAX_BODY_BYTES = 1024 * 1024


def human_bytes(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.3g} MiB"
    if n >= 1024:
        return f"{n / 1024:.3g} KiB"
    return f"{n} bytes"


def default_max_body_bytes() -> int:
    return int(getattr(settings, "API_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))


def too_large_response(limit: int, got: int) -> JsonResponse:
    allowed, sent = human_bytes(limit), human_bytes(got)
    if allowed == sent:  # "at most 1 MiB, got 1 MiB" would say nothing: give the bytes
        allowed, sent = f"{limit} bytes", f"{got} bytes"
    return JsonResponse(
        error_body(
            "request_too_large",
            f"the request body is too large: at most {allowed}, got {sent}",
            [{"field": "<body>", "message": f"must be at most {limit} bytes, got {got}"}],
        ),
        status=413,
    )


def _nul_in(request: HttpRequest) -> str | None:
    """The part of the URL holding a NUL character, if any."""
    if "\x00" in request.path:
        return "<path>"
    for key, values in request.GET.lists():
        if "\x00" in key or any("\x00" in v for v in values):
            return key.replace("\x00", "\\x00")
    return None


class RequestLimitsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = _nul_in(request)
        if field is not None:
            return JsonResponse(
                error_body(
                    "bad_request",
                    "the URL holds a NUL character; no name, id or filter can contain one",
                    [{"field": field, "message": "must not contain NUL (\\x00) characters"}],
                ),
                status=400,
            )
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Any, args: Any, kwargs: Any) -> HttpResponse | None:
        if not request.path.startswith("/api/"):
            return None  # the admin and the login form keep Django's own limits
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse(
                error_body(
                    "bad_request",
                    "the Content-Length header is not a number",
                    [{"field": "Content-Length", "message": "must be a whole number of bytes"}],
                ),
                status=400,
            )
        allowed = getattr(getattr(view_func, "cls", None), "max_body_bytes", None)
        limit = int(allowed()) if callable(allowed) else default_max_body_bytes()
        return too_large_response(limit, length) if length > limit else None


def largest_body_bytes() -> int:
    """The most any API view allows (dataset uploads): the cap before Django reads a body."""
    from webapp.datasets.api.views import DatasetListView

    return max(default_max_body_bytes(), DatasetListView.max_body_bytes())


class AsgiBodyCap:
    """Under ASGI, Django reads a request's whole body (spooling it to disk) before any
    middleware runs, so :class:`RequestLimitsMiddleware` alone would still take in a huge body
    before refusing it. This wraps the ASGI app: an API request whose ``Content-Length`` is
    over the largest limit of any view is refused at once, unread, and a body sent without a
    length (chunked) is cut off once it passes that limit. Per-view limits stay with the
    middleware."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/api/"):
            return await self.app(scope, receive, send)
        cap = largest_body_bytes()
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > cap:
            return await _send_json(send, too_large_response(cap, int(declared)))
        received = 0
        cut_off = False

        async def counted() -> dict[str, Any]:
            nonlocal received, cut_off
            if cut_off:
                return {"type": "http.disconnect"}
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    cut_off = True  # Django stops reading at a disconnect and answers nothing
                    return {"type": "http.disconnect"}
            return message

        await self.app(scope, counted, send)
        if cut_off:
            await _send_json(send, too_large_response(cap, received))
        return None


async def _send_json(send: Any, response: JsonResponse) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(response.content)).encode())]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content})
