"""Request rate limits per caller (a 429 with ``Retry-After`` in the API's error shape).

Counters live in the shared cache (Redis), so every server process counts the same caller
together. A caller is its API token when it uses one (two CI tokens of one user do not
starve each other), else its user, else its address.

Bad tokens are counted per client address apart from that: an address that presents too many
invalid, expired or revoked tokens in a window has every token refused until the window ends,
so guessing is slow. A valid token used from any other address is not affected."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http.request import HttpHeaders
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from tenants.models import ApiToken

DEFAULT_BAD_TOKEN_RATE = "30/min"


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


class FailureGuard:
    """Per key (a client address, a username): ``allowed`` failures in a window that opens with
    the first one, then every attempt is refused until the window closes.

    Two cache keys (the count, the window's start) rather than DRF's history list: the count
    is incremented atomically in Redis, so concurrent guesses cannot race past the limit."""

    def __init__(self, rate: str, *, scope: str) -> None:
        allowed, period = SimpleRateThrottle.parse_rate(None, rate)
        assert allowed is not None and period is not None
        self.allowed, self.period = allowed, period
        self.scope = scope

    def _keys(self, key: str) -> tuple[str, str]:
        base = f"throttle_{self.scope}_{key}"
        return f"{base}_count", f"{base}_since"

    def wait_s(self, address: str) -> float | None:
        """Seconds until ``address`` may try again; None when it may now."""
        count_key, since_key = self._keys(address)
        found = cache.get_many([count_key, since_key])
        if int(found.get(count_key) or 0) < self.allowed:
            return None
        since = float(found.get(since_key) or time.time())
        return max(1.0, since + self.period - time.time())

    def record_failure(self, address: str) -> None:
        count_key, since_key = self._keys(address)
        if cache.add(since_key, time.time(), timeout=self.period):
            cache.set(count_key, 1, timeout=self.period)  # a new window
            return
        try:
            cache.incr(count_key)
        except ValueError:  # the count expired first
            cache.set(count_key, 1, timeout=self.period)


class BadTokenGuard(FailureGuard):
    """API tokens, per client address (``API_BAD_TOKEN_RATE``)."""

    def __init__(self, rate: str | None = None) -> None:
        super().__init__(rate or getattr(settings, "API_BAD_TOKEN_RATE", DEFAULT_BAD_TOKEN_RATE), scope="bad_token")


def client_address(meta: dict[str, Any]) -> str:
    """The peer address as DRF's throttles see it: ``NUM_PROXIES`` decides whether
    X-Forwarded-For is believed (by default not, so a client cannot pick its address)."""
    return str(BaseThrottle().get_ident(SimpleNamespace(META=meta, headers=HttpHeaders(meta))))


def too_many_bad_tokens(wait: float) -> exceptions.Throttled:
    """DRF appends "Expected available in N seconds." and the handler sets Retry-After."""
    return exceptions.Throttled(
        wait=wait,
        detail="too many invalid, expired or revoked API tokens from this address; check the token and retry later.",
    )
