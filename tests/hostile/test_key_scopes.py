"""A key gets at most what its creator holds: a token's own scopes whatever its user's role, a
signed-in user their role's. Beyond that a key is refused (403 naming the scopes) and the
refusal audited. Tokens also never act beyond their user's current role (a token outlives a
demotion), and an owner's narrow token manages only its user's keys."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tenants.models import ApiToken, AuditLog, Membership, Role
from tenants.services import api_token_create, membership_add, tenant_create
from tests.hostile.helpers import client_for, error_of

pytestmark = pytest.mark.django_db

READ, WRITE, ADMIN = "jobs:read", "jobs:write", "admin"
EVERY = frozenset({READ, WRITE, ADMIN})
SESSION = "session"
CREDENTIALS: list[Any] = [SESSION, (READ,), (READ, WRITE), (ADMIN,)]
# What each caller holds: columns in the order of CREDENTIALS. A token may have been created
# while its user held more (before a demotion); it holds no more than the role grants now.
# "staff" is a superuser who is only a viewer in the tenant: staff run the cluster.
HOLDS = {
    "owner": [EVERY, {READ}, {READ, WRITE}, EVERY],
    "member": [{READ, WRITE}, {READ}, {READ, WRITE}, {READ, WRITE}],
    "viewer": [{READ}, {READ}, {READ}, {READ}],
    "staff": [EVERY, {READ}, {READ, WRITE}, EVERY],
}
REQUESTS = [[READ], [WRITE], [ADMIN], [READ, WRITE, ADMIN]]
CASES = [
    pytest.param(
        role,
        credential,
        held,
        wanted,
        id=f"{role}-{'+'.join(credential) if credential != SESSION else credential}-{'+'.join(wanted)}",
    )
    for role, holds in HOLDS.items()
    for credential, held in zip(CREDENTIALS, holds, strict=True)
    for wanted in REQUESTS
]
_serial = count()


def caller(role: str, credential: Any) -> tuple[APIClient, Any, str | None]:
    """A client for ``role`` in a fresh tenant holding ``credential``, its user, its token's key id."""
    n = next(_serial)
    tenant = tenant_create(slug=f"t{n}", name=f"Tenant {n}")
    users = get_user_model().objects
    user = (
        users.create_superuser(username=f"u{n}", password="pw-staff-staff")
        if role == "staff"
        else users.create_user(username=f"u{n}", password="pw-user-user")
    )
    membership_add(tenant=tenant, user=user, role=Role.VIEWER if role == "staff" else role)
    if credential == SESSION:
        client = APIClient()
        client.force_login(user)
        client.credentials(HTTP_X_TENANT=tenant.slug)
        return client, user, None
    token, raw = api_token_create(tenant=tenant, user=user, name="held", scopes=credential)
    return client_for(raw), user, token.key_id


@pytest.mark.parametrize(("role", "credential", "held", "wanted"), CASES)
def test_a_key_gets_at_most_what_its_creator_holds(
    role: str, credential: Any, held: set[str], wanted: list[str]
) -> None:
    client, user, key_id = caller(role, credential)
    keys_before = ApiToken.objects.count()
    r = client.post("/api/v1/api-keys", {"name": "new", "scopes": wanted}, format="json")
    beyond = [s for s in wanted if s not in held]
    if WRITE in held and not beyond:
        assert r.status_code == 201, r.content
        assert r.json()["scopes"] == wanted
        assert client_for(r.json()["token"]).get("/api/v1/me").status_code == 200
        assert AuditLog.objects.filter(action="api_token.create", target=r.json()["key_id"]).exists()
        return
    assert r.status_code == 403, r.content
    error = error_of(r)
    assert error["code"] == "permission_denied"
    named = beyond or [WRITE]  # creating a key is a write
    assert all(s in error["message"] for s in named), error
    if beyond:
        assert [d["field"] for d in error["details"]] == [f"scopes[{wanted.index(s)}]" for s in beyond]
    assert ApiToken.objects.count() == keys_before
    refusal = AuditLog.objects.get(action="api_token.refuse", actor=user)
    assert refusal.data["scopes"] == wanted
    session_name = "a staff account" if role == "staff" else f"the {role} role"
    assert refusal.data["credential"] == (f"this token ({key_id})" if key_id else session_name)


def _second_key(tenant: Any, username: str) -> ApiToken:
    other = get_user_model().objects.create_user(username=username, password="pw-other-other")
    membership_add(tenant=tenant, user=other, role=Role.MEMBER)
    return api_token_create(tenant=tenant, user=other, name="theirs")[0]


def test_an_owners_narrow_token_manages_only_its_users_keys(make_actor: Any) -> None:
    owner = make_actor("acme")  # the owner's token: jobs:read, jobs:write
    theirs = _second_key(owner.tenant, "colleague")
    narrow = client_for(owner.token)
    listed = {k["key_id"] for k in narrow.get("/api/v1/api-keys").json()["results"]}
    assert theirs.key_id not in listed
    assert narrow.delete(f"/api/v1/api-keys/{theirs.key_id}").status_code == 404
    theirs.refresh_from_db()
    assert theirs.is_active()

    signed_in = APIClient()
    signed_in.force_login(owner.user)
    listed = {k["key_id"] for k in signed_in.get("/api/v1/api-keys").json()["results"]}
    assert theirs.key_id in listed
    assert signed_in.delete(f"/api/v1/api-keys/{theirs.key_id}").status_code == 204


def test_a_token_loses_what_its_users_new_role_no_longer_grants(make_actor: Any) -> None:
    owner = make_actor("acme", scopes=(ADMIN,))
    theirs = _second_key(owner.tenant, "colleague")
    own_spare = api_token_create(tenant=owner.tenant, user=owner.user, name="spare")[0]
    client = client_for(owner.token)

    membership_add(tenant=owner.tenant, user=owner.user, role=Role.MEMBER)
    listed = {k["key_id"] for k in client.get("/api/v1/api-keys").json()["results"]}
    assert theirs.key_id not in listed  # admin is gone with ownership
    assert client.delete(f"/api/v1/api-keys/{theirs.key_id}").status_code == 404

    membership_add(tenant=owner.tenant, user=owner.user, role=Role.VIEWER)
    assert client.get("/api/v1/jobs").status_code == 200
    r = client.delete(f"/api/v1/api-keys/{own_spare.key_id}")
    assert r.status_code == 403 and WRITE in error_of(r)["message"]
    own_spare.refresh_from_db()
    assert own_spare.is_active()

    Membership.objects.filter(tenant=owner.tenant, user=owner.user).delete()  # gone, tokens not revoked
    r = client.get("/api/v1/jobs")
    assert r.status_code == 403 and "no longer a member" in error_of(r)["message"]
