"""Request rate limits per caller (a 429 with ``Retry-After`` in the API's error shape).

Counters live in the shared cache (Redis), so every server process counts the same caller
together. A caller is its API token when it uses one (two CI tokens of one user do not
starve each other), else its user, else its address."""

from __future__ import annotations

from typing import Any

from rest_framework.throttling import SimpleRateThrottle

from tenants.models import ApiToken


class CallerRateThrottle(SimpleRateThrottle):
    scope = "caller"

    def get_cache_key(self, request: Any, view: Any) -> str:
        token = request.auth if isinstance(request.auth, ApiToken) else None
        if token is not None:
            ident = f"token:{token.key_id}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"addr:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class JobCreateRateThrottle(CallerRateThrottle):
    """Submitting is the expensive call (validation, admission): its own, lower limit."""

    scope = "job_create"
