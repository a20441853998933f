"""Serves the built dashboard (``frontend/dist/index.html``) for every client-side route."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import ensure_csrf_cookie


@login_required
@ensure_csrf_cookie
def dashboard(request: HttpRequest, path: str = "") -> HttpResponse:
    index = settings.FRONTEND_DIST / "index.html"
    if not index.exists():
        return HttpResponse(
            "The dashboard is not built: run `make frontend` (npm ci && npm run build in frontend/).",
            status=503,
            content_type="text/plain",
        )
    return HttpResponse(index.read_text(), content_type="text/html")
