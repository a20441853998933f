"""Signatures a receiver can check: HMAC-SHA256 with the endpoint's secret over
``<timestamp>.<body>``, the timestamp being the attempt's Unix time in seconds (sent in its own
header, so a receiver can refuse an old delivery replayed at it)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
EVENT_ID_HEADER = "Jigsaw-Event-Id"
TIMESTAMP_HEADER = "Jigsaw-Timestamp"
SIGNATURE_HEADER = "Jigsaw-Signature"
DELIVERY_HEADER = "Jigsaw-Delivery"


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The ``Jigsaw-Signature`` value: ``v1=<hex digest>`` (the version names the scheme)."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"v1={digest}"
