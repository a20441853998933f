"""The site's URLs plus views and a middleware that crash, for the tests of what a client
sees of a server error (tests/web/test_api_error_pages.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.urls import handler400, handler404, handler500
from webapp.urls import urlpatterns as site_urlpatterns

SECRET = "db-password=hunter2"  # in the exception only: a client must never see it


class CrashingApiView(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    def get(self, request: Request) -> HttpResponse:
        raise RuntimeError(f"the view failed ({SECRET})")


def crashing_plain_view(request: HttpRequest) -> HttpResponse:
    raise RuntimeError(f"the view failed ({SECRET})")


class CrashingMiddleware:
    """Fails before any view runs, for paths ending in ``crash-in-middleware``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.endswith("crash-in-middleware"):
            raise RuntimeError(f"the middleware failed ({SECRET})")
        return self.get_response(request)


urlpatterns = [
    path("api/v1/test/crash", CrashingApiView.as_view()),
    path("api/v1/test/crash-plain", crashing_plain_view),
    *site_urlpatterns,
]
__all__ = ["handler400", "handler404", "handler500", "urlpatterns"]
