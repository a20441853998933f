"""Tokens beyond what tests/web covers (bad, expired, revoked, read-only on jobs): malformed
Authorization headers, wrong scopes on every kind of write, the admin routes, a token that
tries another tenant, and guessing: many bad tokens from one address are throttled (429 with
Retry-After) while the same valid token keeps working from another address."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test.utils import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import ApiToken
from tests.engine.builders import make_spec
from tests.hostile.helpers import client_for, error_of, submit
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db

ROWS = '{"prompt": "1+1?", "answer": "2"}\n'


def fresh_address() -> str:
    """An address no other test (or an earlier run within the window) has counted against."""
    return f"198.18.{random.randrange(256)}.{random.randrange(1, 255)}"


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Bearer ",
        "Bearer jrl",
        "Bearer jrl__",
        "Bearer jrl_000000000000_",
        "Bearer jrl_' OR 1=1 --_x",
        "Bearer jrl_\u00e9\u00e9_secret",
        "Bearer " + "jrl_" + "a" * 8000,
        "bearer   jrl_x_y   ",
    ],
)
def test_malformed_tokens_are_401_in_the_error_shape(header: str) -> None:
    client = APIClient(REMOTE_ADDR=fresh_address())
    r = client.get("/api/v1/jobs", HTTP_AUTHORIZATION=header)
    assert r.status_code == 401, (header, r.status_code)
    assert error_of(r)["code"] in ("authentication_failed", "not_authenticated")
    assert r["WWW-Authenticate"] == 'Bearer realm="api"'


def test_a_right_key_id_with_a_wrong_secret_is_refused(make_actor: Any) -> None:
    actor = make_actor("acme")
    key_id = actor.token.split("_")[1]
    r = client_for(f"jrl_{key_id}_not-the-secret", fresh_address()).get("/api/v1/jobs")
    assert r.status_code == 401
    assert ApiToken.objects.get(key_id=key_id).last_used_at is None  # a failed try does not count as use


def test_a_read_only_token_can_write_nothing(make_actor: Any) -> None:
    owner = make_actor("acme")
    job_id = submit(client_for(owner.token), {"spec": make_spec()}).json()["id"]
    assert (
        client_for(owner.token).post("/api/v1/datasets", {"name": "d", "content": ROWS}, format="json").status_code
        == 201
    )
    reader = ApiToken.objects.get(tenant=owner.tenant)
    reader.scopes = ["jobs:read"]
    reader.save()
    client = client_for(owner.token)
    assert client.get(f"/api/v1/jobs/{job_id}").status_code == 200
    for method, path, body in [
        ("post", "/api/v1/jobs", {"spec": make_spec()}),
        ("patch", f"/api/v1/jobs/{job_id}", {"name": "renamed"}),
        ("post", f"/api/v1/jobs/{job_id}/cancel", None),
        ("post", f"/api/v1/jobs/{job_id}/pause", None),
        ("post", f"/api/v1/jobs/{job_id}/clone", {}),
        ("post", "/api/v1/datasets", {"name": "e", "content": ROWS}),
        ("delete", "/api/v1/datasets/d", None),
        ("post", "/api/v1/api-keys", {"name": "more", "scopes": ["jobs:read"]}),
        ("delete", f"/api/v1/api-keys/{reader.key_id}", None),
    ]:
        r = getattr(client, method)(path, body, format="json", HTTP_IDEMPOTENCY_KEY="k")
        assert r.status_code == 403, (method, path, r.status_code)
        assert error_of(r)["code"] == "permission_denied"
    assert client.get(f"/api/v1/jobs/{job_id}").json()["name"] != "renamed"


def test_a_write_only_token_cannot_read(make_actor: Any) -> None:
    writer = make_actor("acme", scopes=("jobs:write",))
    client = client_for(writer.token)
    for path in ["/api/v1/jobs", "/api/v1/datasets", "/api/v1/quota", "/api/v1/usage"]:
        assert client.get(path).status_code == 403, path


def test_admin_routes_need_staff_and_the_admin_scope(make_actor: Any) -> None:
    member = make_actor("acme")
    staff = make_actor("globex")
    staff.user.is_staff = True
    staff.user.save()
    for token in (member.token, staff.token):  # staff, but the token lacks the admin scope
        client = client_for(token)
        for path in ["/api/v1/admin/tenants", "/api/v1/admin/queue", "/api/v1/admin/audit", "/api/v1/admin/usage"]:
            assert client.get(path).status_code == 403, path
        r = client.patch("/api/v1/admin/tenants/acme/quota", {"max_running_jobs": 99}, format="json")
        assert r.status_code == 403
    admin_token = make_actor("initech", scopes=("jobs:read", "admin"))
    assert client_for(admin_token.token).get("/api/v1/admin/tenants").status_code == 403  # admin scope, not staff


def test_a_token_stays_in_its_tenant_whatever_the_request_says(make_actor: Any) -> None:
    acme, globex = make_actor("acme"), make_actor("globex")
    theirs = submit(client_for(globex.token), {"spec": make_spec()}).json()["id"]
    client = client_for(acme.token)
    assert client.get(f"/api/v1/jobs/{theirs}", HTTP_X_TENANT="globex").status_code == 404
    assert client.get("/api/v1/jobs", HTTP_X_TENANT="globex").json()["results"] == []
    # Naming another tenant in the query or the body is refused as an unknown name.
    assert error_of(client.get("/api/v1/jobs?tenant=globex"))["details"][0]["field"] == "tenant"
    assert error_of(submit(client, {"spec": make_spec(), "tenant": "globex"}))["details"][0]["field"] == "tenant"
    r = submit(client, {"spec": make_spec()}, HTTP_X_TENANT="globex")
    assert r.status_code == 201 and r.json()["tenant"] == "acme"
    assert Job.objects.filter(tenant=globex.tenant).count() == 1


@pytest.mark.django_db(transaction=True)  # consumers read the database from their own threads
def test_an_expired_token_is_refused_on_the_websocket_too(make_actor: Any) -> None:
    """Expiry is checked when a socket opens, as for HTTP (revocation mid-stream is in tests/web)."""
    from asgiref.sync import async_to_sync
    from channels.testing.websocket import WebsocketCommunicator

    from webapp.asgi import application

    actor = make_actor("acme")
    ApiToken.objects.filter(tenant=actor.tenant).update(expires_at=timezone.now() - timedelta(seconds=1))

    async def close_code() -> int:
        ws = WebsocketCommunicator(
            application, "/ws/v1/tenant", headers=[(b"authorization", f"Bearer {actor.token}".encode())]
        )
        ws.scope["client"] = (fresh_address(), 5000)
        connected, code = await ws.connect(timeout=5)
        if connected:
            code = (await ws.receive_output(timeout=5))["code"]
        await ws.disconnect()
        return int(code)

    assert async_to_sync(close_code)() == 4401


def test_guessing_tokens_is_throttled_per_address_without_locking_out_the_owner(make_actor: Any) -> None:
    actor = make_actor("acme")
    allowed = int(settings.API_BAD_TOKEN_RATE.split("/")[0])
    attacker = fresh_address()
    key_id = actor.token.split("_")[1]
    for i in range(allowed):
        r = client_for(f"jrl_{key_id}_guess{i}", attacker).get("/api/v1/jobs")
        assert r.status_code == 401, i

    refused = client_for(f"jrl_{key_id}_guess-more", attacker).get("/api/v1/jobs")
    assert refused.status_code == 429
    error = error_of(refused)
    assert error["code"] == "throttled" and "too many invalid" in error["message"]
    assert 1 <= int(refused["Retry-After"]) <= 61
    # While refused, even the right token is not checked from there (a right guess must not show)...
    assert client_for(actor.token, attacker).get("/api/v1/jobs").status_code == 429
    # ...and a client cannot pick another address through X-Forwarded-For.
    spoofed = client_for("jrl_x_y", attacker).get("/api/v1/jobs", HTTP_X_FORWARDED_FOR="192.0.2.1")
    assert spoofed.status_code == 429
    # The owner, elsewhere, is not affected.
    assert client_for(actor.token, fresh_address()).get("/api/v1/jobs").status_code == 200


def test_a_valid_token_does_not_count_against_its_address(make_actor: Any) -> None:
    actor = make_actor("acme")
    address = fresh_address()
    allowed = int(settings.API_BAD_TOKEN_RATE.split("/")[0])
    client = client_for(actor.token, address)
    for _ in range(allowed + 5):
        assert client.get("/api/v1/me").status_code == 200


@pytest.mark.django_db(transaction=True)  # consumers read the database from their own threads
@override_settings(API_BAD_TOKEN_RATE="3/min")
def test_guessing_over_websockets_counts_too(make_actor: Any) -> None:
    from asgiref.sync import async_to_sync
    from channels.testing.websocket import WebsocketCommunicator

    from webapp.asgi import application

    actor = make_actor("acme")
    attacker = fresh_address()

    async def close_code(token: str, address: str) -> int:
        ws = WebsocketCommunicator(
            application, "/ws/v1/tenant", headers=[(b"authorization", f"Bearer {token}".encode())]
        )
        ws.scope["client"] = (address, 5000)
        connected, code = await ws.connect(timeout=5)
        if connected:
            message = await ws.receive_output(timeout=5)
            code = message.get("code", 1000) if message["type"] == "websocket.close" else 1000
        await ws.disconnect()
        return int(code)

    assert [async_to_sync(close_code)(f"jrl_x_guess{i}", attacker) for i in range(3)] == [4401] * 3
    assert async_to_sync(close_code)(actor.token, attacker) == 4429
    # HTTP from the same address is refused as well: one count per address.
    assert client_for(actor.token, attacker).get("/api/v1/jobs").status_code == 429
    assert async_to_sync(close_code)(actor.token, fresh_address()) == 1000  # open: the owner elsewhere
