"""``Idempotency-Key`` handling for job creation, the way payment APIs do it.

The key is claimed in its own committed transaction before any work; the response is stored
with the work. A replay gets the stored response; a duplicate still in flight gets 409; the
same key with a different body gets 422. A claim whose request died (no response after
``STALE_CLAIM_S``) may be taken over.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from tenants.models import Tenant
from webapp.jobs.errors import IdempotencyInFlight, IdempotencyMismatch
from webapp.jobs.models import IdempotencyRecord

STALE_CLAIM_S = 120


@dataclass(frozen=True, slots=True)
class StoredResponse:
    status: int
    body: Any


def request_fingerprint(body: Any) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


_CLAIM_SQL = (
    f'INSERT INTO {IdempotencyRecord._meta.db_table} (tenant_id, "key", request_hash, created_at)'
    " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
)


def _insert_claim(*, tenant: Tenant, key: str, fingerprint: str) -> bool:
    """Whether this request claimed ``key``: one statement, committed by itself (a duplicate
    must see the claim while the work runs), that skips a taken key instead of raising, so it
    needs no transaction of its own, nor a savepoint inside a caller's."""
    with connection.cursor() as cursor:
        now = connection.ops.adapt_datetimefield_value(timezone.now())  # as the ORM stores it
        cursor.execute(_CLAIM_SQL, [tenant.pk, key, fingerprint, now])
        return cursor.rowcount == 1


def idempotency_claim(*, tenant: Tenant, key: str, fingerprint: str) -> StoredResponse | None:
    """Claim ``key``; returns the stored response if this is a replay, else None (go ahead)."""
    if _insert_claim(tenant=tenant, key=key, fingerprint=fingerprint):
        return None
    with transaction.atomic():
        record = IdempotencyRecord.objects.select_for_update().get(tenant=tenant, key=key)
        if record.request_hash != fingerprint:
            raise IdempotencyMismatch(
                "this Idempotency-Key was used with a different request body; use a new key",
                [{"field": "Idempotency-Key", "message": "already used for another request"}],
            )
        if record.response_status is not None:
            return StoredResponse(record.response_status, record.response_body)
        if timezone.now() - record.created_at < timedelta(seconds=STALE_CLAIM_S):
            raise IdempotencyInFlight("a request with this Idempotency-Key is still in progress; retry shortly")
        record.created_at = timezone.now()  # take over a claim whose request died
        record.save(update_fields=["created_at"])
        return None


def idempotency_store(*, tenant: Tenant, key: str, status: int, body: Any) -> None:
    IdempotencyRecord.objects.filter(tenant=tenant, key=key).update(response_status=status, response_body=body)


def idempotency_release(*, tenant: Tenant, key: str) -> None:
    """Drop a claim whose request failed before producing a response worth replaying."""
    IdempotencyRecord.objects.filter(tenant=tenant, key=key, response_status__isnull=True).delete()
