"""Password guessing on the sign-in pages (the dashboard's and the admin's) is throttled.

``LOGIN_FAILURE_RATE`` failed sign-ins per client address, and as many per username from any
address, then every sign-in from that address or for that username is refused with a 429 and
``Retry-After`` until the window ends, the right password included (a right guess must look
like a wrong one). Failures are counted from Django's ``user_login_failed`` signal, in Redis
like the API's bad tokens, so every server process counts together."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse

from webapp.api.throttling import FailureGuard, client_address

DEFAULT_LOGIN_FAILURE_RATE = "10/min"
LOGIN_PATHS = frozenset({settings.LOGIN_URL, "/admin/login/"})


def _guards() -> tuple[FailureGuard, FailureGuard]:
    rate = getattr(settings, "LOGIN_FAILURE_RATE", DEFAULT_LOGIN_FAILURE_RATE)
    return FailureGuard(rate, scope="login_addr"), FailureGuard(rate, scope="login_user")


def _username_key(username: object) -> str:
    # Case-folded and bounded: a cache key, not an identity (the form authenticates).
    return str(username or "").strip().casefold()[:150].encode().hex()


def _count_failure(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **_: Any) -> None:
    if request is None:  # authenticate() called outside a request: nothing to throttle
        return
    by_address, by_user = _guards()
    by_address.record_failure(client_address(request.META))
    by_user.record_failure(_username_key(credentials.get("username")))


class LoginThrottleMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        user_login_failed.connect(_count_failure, dispatch_uid="jigsaw-login-throttle")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in LOGIN_PATHS:
            by_address, by_user = _guards()
            waits = [
                by_address.wait_s(client_address(request.META)),
                by_user.wait_s(_username_key(request.POST.get("username"))),
            ]
            wait = max((w for w in waits if w is not None), default=None)
            if wait is not None:
                seconds = math.ceil(wait)
                response = HttpResponse(
                    f"Too many failed sign-ins from this address or for this user. Try again in {seconds} seconds.",
                    status=429,
                    content_type="text/plain; charset=utf-8",
                )
                response["Retry-After"] = str(seconds)
                return response
        return self.get_response(request)
