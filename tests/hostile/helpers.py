"""Shared by the hostile-input tests: a client holding a tenant token, the one error shape, and
things that exist for requests to aim at."""

from __future__ import annotations

import json
import uuid
from typing import Any

from rest_framework.test import APIClient

from tenants.services import api_token_create
from tests.engine.builders import make_spec

ROWS = "\n".join(json.dumps({"prompt": f"What is {i}+{i}?", "answer": str(2 * i)}) for i in range(3))


def client_for(token: str, address: str = "127.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def submit(client: APIClient, body: Any, **extra: Any) -> Any:
    return client.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()), **extra)


def error_of(response: Any) -> dict[str, Any]:
    """The body's ``error`` after checking it has the API's one shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"} and error["message"], error
    for detail in error["details"]:
        assert set(detail) == {"field", "message"} and detail["field"] and detail["message"], detail
    return dict(error)


class Targets:
    """What requests run as, and the ids worth aiming at (by path parameter name)."""

    def __init__(self, member: Any, admin_token: str, job_id: str, key_id: str, bystander: Any) -> None:
        self.member = member
        self.admin_token = admin_token
        self.real_ids = {
            "id": job_id,
            "name": "target-data",
            "key_id": key_id,
            # Admin edits aim at a third tenant: removing the member (or the staff user) from
            # their own tenant would revoke the tokens the other requests send.
            "slug": bystander.tenant.slug,
            "username": bystander.user.username,
        }


def populate(make_actor: Any) -> Targets:
    """A tenant member with a job, a dataset and a spare API key; a staff user whose token holds
    ``admin``; a third tenant. The caller sets DATASETS_DIR."""
    member = make_actor("acme")
    client = client_for(member.token)
    job_id = submit(client, {"name": "target", "spec": make_spec()}).json()["id"]
    assert client.post("/api/v1/datasets", {"name": "target-data", "content": ROWS}, format="json").status_code == 201
    spare, _ = api_token_create(tenant=member.tenant, user=member.user, name="spare")
    staff = make_actor("ops", scopes=("jobs:read", "jobs:write", "admin"))
    staff.user.is_staff = True
    staff.user.save()
    return Targets(member, staff.token, job_id, spare.key_id, make_actor("bystander"))
