"""``/healthz`` reports each dependency; ``/readyz`` says whether to send traffic here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from webapp import engine_gateway


def _check(fn: Callable[[], Any]) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        detail = fn()
        result: dict[str, Any] = {"ok": True}
        if detail:
            result["detail"] = detail
    except Exception as exc:  # a health endpoint reports failures, it never raises them
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    result["latency_ms"] = round((time.perf_counter() - start) * 1000, 1)
    return result


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return connection.vendor


def _redis() -> str:
    if settings.STANDALONE:
        return "not used (standalone mode)"
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return "ping ok"


def _engine() -> dict[str, Any]:
    info = engine_gateway.describe_engine()
    return {"backend": settings.ENGINE_BACKEND, "cluster": info.get("cluster"), "pipelines": info.get("pipelines")}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _check(_database), "redis": _check(_redis), "engine": _check(_engine)}
    ok = all(c["ok"] for c in checks.values())
    return JsonResponse({"status": "ok" if ok else "degraded", "checks": checks}, status=200 if ok else 503)


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    def migrations_applied() -> str:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if pending:
            raise RuntimeError(f"{len(pending)} migrations not applied; run manage.py migrate")
        return "all applied"

    checks = {"database": _check(_database), "migrations": _check(migrations_applied)}
    ok = all(c["ok"] for c in checks.values())
    return JsonResponse({"status": "ready" if ok else "not ready", "checks": checks}, status=200 if ok else 503)
