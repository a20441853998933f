"""ASGI entry: HTTP through Django, WebSockets through Channels (session or token auth)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from webapp.api.request_limits import AsgiBodyCap  # noqa: E402
from webapp.api.ws_auth import OriginOrTokenValidator, TokenAuthMiddleware  # noqa: E402
from webapp.gc_tuning import freeze_startup_heap  # noqa: E402
from webapp.jobs.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": AsgiBodyCap(django_asgi_app),
        "websocket": OriginOrTokenValidator(AuthMiddlewareStack(TokenAuthMiddleware(URLRouter(websocket_urlpatterns)))),
    }
)
freeze_startup_heap()  # last: everything above is loaded (webapp/gc_tuning.py)
