"""The Django admin edits quotas and memberships and revokes tokens, and every such change
lands in the audit log, as it does through the admin API."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tenants.models import ApiToken, AuditLog
from tests.engine.builders import make_spec

pytestmark = pytest.mark.django_db(transaction=True)


class FormValues(HTMLParser):
    """The values a browser would submit for the page's main form."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "checkbox"):
            self.values[name] = a.get("value", "")
        elif tag == "input" and name and a.get("type") == "checkbox" and "checked" in a:
            self.values[name] = "on"
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.values[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.values[name] = ""

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.values[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def form_of(client: Client, url: str) -> dict[str, str]:
    parser = FormValues()
    parser.feed(client.get(url).content.decode())
    parser.values.pop("csrfmiddlewaretoken", None)
    return parser.values


def test_quota_and_membership_edits_in_the_admin_are_audited(make_actor: Any, admin_user: Any) -> None:
    actor = make_actor("acme")
    c = Client()
    c.force_login(admin_user)
    url = f"/admin/tenants/tenant/{actor.tenant.pk}/change/"
    form = form_of(c, url)
    assert form["quota-0-max_running_jobs"] == "4"
    form["quota-0-max_running_jobs"] = "2"
    form["memberships-0-role"] = "viewer"
    response = c.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    quota_entry = AuditLog.objects.get(action="quota.update", actor=admin_user)
    assert quota_entry.data == {"max_running_jobs": {"from": 4, "to": 2}}
    member_entry = AuditLog.objects.get(action="membership.set", actor=admin_user)
    assert member_entry.data == {"role": "viewer"} and member_entry.target == actor.user.username


def test_tokens_are_revoked_from_the_admin_with_an_audit_entry(make_actor: Any, admin_user: Any) -> None:
    actor = make_actor("acme")
    token = ApiToken.objects.get(tenant=actor.tenant)
    c = Client()
    c.force_login(admin_user)
    response = c.post(
        "/admin/tenants/apitoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]}, follow=True
    )
    assert response.status_code == 200
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert AuditLog.objects.filter(action="api_token.revoke", target=token.key_id, actor=admin_user).exists()
    assert c.get("/admin/tenants/apitoken/add/").status_code == 403  # secrets are minted by the API only


def test_removing_a_member_in_the_admin_revokes_their_tokens(make_actor: Any, admin_user: Any) -> None:
    from tests.hostile.helpers import client_for

    actor = make_actor("acme")
    assert client_for(actor.token).get("/api/v1/jobs").status_code == 200
    c = Client()
    c.force_login(admin_user)
    url = f"/admin/tenants/tenant/{actor.tenant.pk}/change/"
    form = form_of(c, url)
    form["memberships-0-DELETE"] = "on"
    response = c.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert AuditLog.objects.filter(action="membership.delete", actor=admin_user).exists()
    assert ApiToken.objects.get(tenant=actor.tenant).revoked_at is not None
    assert client_for(actor.token).get("/api/v1/jobs").status_code == 401


def test_a_tenants_gpu_hour_price_is_set_in_the_admin_audited_and_estimated_with(
    make_actor: Any, admin_user: Any
) -> None:
    actor = make_actor("acme")
    c = Client()
    c.force_login(admin_user)
    url = f"/admin/tenants/tenant/{actor.tenant.pk}/change/"
    form = form_of(c, url)
    assert form["gpu_hour_price"] == ""  # the service's price until one is set
    form["gpu_hour_price"] = "4.2"
    response = c.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditLog.objects.get(action="tenant.price", actor=admin_user)
    assert entry.target == "acme" and entry.data == {"gpu_hour_price": {"from": None, "to": "4.2"}}

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {actor.token}")
    cost = api.post("/api/v1/jobs/estimate", {"spec": make_spec()}, format="json").json()["cost"]
    assert cost["gpu_hour_price"] == 4.2 and cost["price_source"] == "tenant"
