"""Tenant isolation over every route and socket, discovered from the URL configuration: a
route added later is checked without anyone remembering to (or the test says how to add it).

Tenant B (by API token and by browser session) calls every method of every /api/v1 route
with tenant A's ids: each must answer 404 (foreign object) or 403 (admin routes), leave A's
objects unchanged, and no tenant-level response may mention A's ids."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channels.testing.websocket import WebsocketCommunicator
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from tenants.models import ApiToken
from tests.engine.builders import make_spec
from webapp.asgi import application
from webapp.jobs.models import Job
from webapp.jobs.routing import websocket_urlpatterns
from webapp.webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)

NOT_TENANT_DATA = {"schema", "api-docs", "presets", "me"}
"""Routes that hold no tenant data (checked separately: me lists only the caller's tenants)."""


def api_routes() -> Iterator[tuple[str, URLPattern]]:
    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern), p

    for route, pattern in walk(get_resolver().url_patterns, ""):
        if route.startswith("api/v1/"):
            yield route, pattern


def methods_of(pattern: URLPattern) -> list[str]:
    actions = getattr(pattern.callback, "actions", None)
    if actions:
        return sorted(actions)
    view = getattr(pattern.callback, "cls", None) or getattr(pattern.callback, "view_class", None)
    assert view is not None, f"{pattern.name}: not a class-based view; add it to the isolation matrix"
    return sorted(m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m))


def url_for(route: str, pattern: URLPattern, ids: dict[str, str]) -> str:
    path = "/" + route.replace("^", "").replace("/?$", "").replace("$", "")
    for kwarg in pattern.pattern.regex.groupindex:
        assert kwarg in ids, f"route {route}: no foreign id known for <{kwarg}>; teach the isolation matrix"
        path = re.sub(rf"\(\?P<{kwarg}>[^)]*\)", ids[kwarg], path)
        for converter in ("str", "slug", "uuid", "int"):
            path = path.replace(f"<{converter}:{kwarg}>", ids[kwarg])
    return path


@pytest.fixture()
def two_tenants(make_actor: Any) -> tuple[Any, Any, Job]:
    a, b = make_actor("acme"), make_actor("globex")
    owner = APIClient()
    owner.credentials(HTTP_AUTHORIZATION=f"Bearer {a.token}")
    r = owner.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201
    d = owner.post(
        "/api/v1/datasets", {"name": "acme-data", "content": '{"prompt": "1+1", "answer": "2"}'}, format="json"
    )
    assert d.status_code == 201, d.content
    return a, b, Job.objects.get(pk=r.json()["id"])


def callers(b: Any) -> dict[str, APIClient]:
    by_token = APIClient()
    by_token.credentials(HTTP_AUTHORIZATION=f"Bearer {b.token}")
    by_session = APIClient()
    by_session.force_login(b.user)
    return {"token": by_token, "session": by_session}


def test_every_route_refuses_another_tenants_objects(two_tenants: tuple[Any, Any, Job]) -> None:
    a, b, job = two_tenants
    key_a = ApiToken.objects.get(tenant=a.tenant).key_id
    hook_a = WebhookEndpoint.objects.create(tenant=a.tenant, url="https://hooks.example.com/acme", secret="whsec_a")
    ids = {
        "pk": str(job.pk),
        "key_id": key_a,
        "slug": a.tenant.slug,
        "username": a.user.username,
        "name": "acme-data",
        "endpoint_id": str(hook_a.pk),
        "step": "1",
    }
    before = Job.objects.filter(pk=job.pk).values().get()
    checked = []
    for route, pattern in api_routes():
        if pattern.name in NOT_TENANT_DATA:
            continue
        url = url_for(route, pattern, ids)
        has_foreign_id = bool(pattern.pattern.regex.groupindex) or "<" in route
        for method in methods_of(pattern):
            for how, client in callers(b).items():
                r = getattr(client, method)(url, {}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
                where = f"{method.upper()} {url} as tenant B ({how})"
                if "/admin/" in url or ("/webhooks" in url and how == "token"):  # B's token lacks admin
                    assert r.status_code == 403, f"{where}: {r.status_code}"
                elif has_foreign_id:
                    assert r.status_code == 404, f"{where}: {r.status_code} {r.content[:200]!r}"
                else:
                    body = b"".join(r) if r.streaming else r.content
                    for secret in (str(job.pk), key_a, a.tenant.slug, str(hook_a.pk)):
                        assert secret.encode() not in body, f"{where} leaks {secret}"
                checked.append((pattern.name, method))
    assert Job.objects.filter(pk=job.pk).values().get() == before
    assert ApiToken.objects.get(key_id=key_a).revoked_at is None
    assert WebhookEndpoint.objects.filter(pk=hook_a.pk).exists()
    names = {n for n, _ in checked}
    assert {"job-detail", "job-cancel", "job-pause", "job-stream", "job-checkpoint-download"} <= names
    assert {"api-key", "admin-quota", "quota"} <= names
    assert {"webhooks", "webhook", "webhook-deliveries"} <= names


def test_me_lists_only_the_callers_tenants(two_tenants: tuple[Any, Any, Job]) -> None:
    _, b, _ = two_tenants
    for client in callers(b).values():
        assert [t["slug"] for t in client.get("/api/v1/me").json()["tenants"]] == ["globex"]


@pytest.mark.asyncio
async def test_every_job_socket_refuses_another_tenants_job(two_tenants: tuple[Any, Any, Job]) -> None:
    _, b, job = two_tenants
    job_routes = [p for p in websocket_urlpatterns if "job_id" in p.pattern.regex.groupindex]
    assert job_routes, "no job socket found"
    for pattern in job_routes:
        path = "/" + str(pattern.pattern).replace("^", "").replace("$", "")
        path = path.replace("(?P<job_id>[0-9a-fA-F-]{32,36})", str(job.pk)).replace("/?", "/")
        ws = WebsocketCommunicator(application, path, headers=[(b"authorization", f"Bearer {b.token}".encode())])
        connected, code = await ws.connect()
        if connected:
            message = await ws.receive_output(timeout=5)
            assert message["type"] == "websocket.close" and message["code"] == 4404, path
        else:
            assert code == 4404, path
        await ws.disconnect()
