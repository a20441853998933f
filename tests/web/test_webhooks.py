"""Webhooks as a tenant's receiver sees them: registered with a secret shown once, refused for
addresses inside the service's network, every status change of a job delivered once, signed and
in order, held back and retried while the receiver is down, and logged per endpoint."""

from __future__ import annotations

import itertools
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tenants.models import AuditLog
from tests.engine.builders import make_spec
from tests.web.webhook_receiver import Receiver, verify
from webapp.jobs.journal import JobJournal, job_events_journaled
from webapp.jobs.models import EventKind, Job, JobEvent, JobStatus
from webapp.jobs.services import lifecycle
from webapp.webhooks import delivery, sender
from webapp.webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


@pytest.fixture()
def local_receivers(settings: Any) -> None:
    """Receivers on this machine's loopback are allowed, over plain HTTP, with short backoffs."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_RETRY_BASE_S = 0.05
    settings.WEBHOOK_RETRY_MAX_S = 0.4
    settings.WEBHOOK_TIMEOUT_S = 5.0


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def register(c: APIClient, url: str) -> dict[str, Any]:
    r = c.post("/api/v1/webhooks", {"url": url, "description": "ops"}, format="json")
    assert r.status_code == 201, r.content
    return r.json()  # type: ignore[no-any-return]


def owner_with_endpoint(make_actor: Any, url: str) -> tuple[APIClient, dict[str, Any]]:
    c = client_for(make_actor("acme", scopes=("admin",)).token)
    return c, register(c, url)


def new_job(c: APIClient) -> str:
    r = c.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    return str(r.json()["id"])


def wait_for(done: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def status_event_ids(job_id: str) -> list[str]:
    seqs = JobEvent.objects.filter(job_id=job_id, kind=EventKind.STATUS).order_by("seq").values_list("seq", flat=True)
    return [f"{job_id}:{seq}" for seq in seqs]


def all_settled(job_id: str) -> bool:
    job = Job.objects.get(pk=job_id)
    return job.is_terminal and not WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).exists()


def test_a_jobs_status_changes_reach_the_receiver_signed_once_each_in_order(
    celery_worker_thread: Any, engine_speed: Any, local_receivers: None, receiver: Receiver, make_actor: Any
) -> None:
    owner = make_actor("acme", scopes=("admin",))
    c = client_for(owner.token)
    receiver.start()
    created = register(c, receiver.url)
    secret = created["secret"]
    assert secret.startswith("whsec_") and created["note"].startswith("store this secret now")

    job_id = new_job(c)
    wait_for(lambda: all_settled(job_id), "the job to end and its deliveries to settle")

    expected = status_event_ids(job_id)
    assert receiver.event_ids() == expected, "each status event once, in the job's order"
    statuses = [r.event["data"]["status"] for r in receiver.received]
    distinct = [s for i, s in enumerate(statuses) if i == 0 or s != statuses[i - 1]]
    assert distinct == ["queued", "starting", "running", "succeeded"]
    for r in receiver.received:
        assert verify(secret, r.headers["Jigsaw-Timestamp"], r.body, r.headers["Jigsaw-Signature"])
        assert not verify("whsec_wrong", r.headers["Jigsaw-Timestamp"], r.body, r.headers["Jigsaw-Signature"])
        assert r.event["id"] == r.headers["Jigsaw-Event-Id"] and r.event["tenant"] == "acme"
        assert r.event["type"] == "job.status" and r.event["data"]["job_id"] == job_id

    # The log: one delivered entry per event, newest first, the answer recorded.
    log = c.get(f"/api/v1/webhooks/{created['id']}/deliveries").json()["results"]
    assert [d["event_id"] for d in log] == expected[::-1]
    assert {(d["status"], d["attempts"], d["last_status_code"]) for d in log} == {("delivered", 1, 200)}

    # The secret was shown once: neither the list nor the endpoint itself shows it again.
    listed = c.get("/api/v1/webhooks").json()["results"]
    assert [e["id"] for e in listed] == [created["id"]] and "secret" not in listed[0]
    assert "secret" not in c.get(f"/api/v1/webhooks/{created['id']}").json()


def test_a_receiver_down_then_up_gets_every_event_in_order(
    celery_worker_thread: Any,
    engine_speed: Any,
    local_receivers: None,
    settings: Any,
    receiver: Receiver,
    make_actor: Any,
) -> None:
    settings.WEBHOOK_MAX_ATTEMPTS = 10_000  # the outage outlasts the job: never give up here
    owner = make_actor("acme", scopes=("admin",))
    c = client_for(owner.token)
    created = register(c, receiver.url)  # the receiver is not listening yet: connections are refused
    job_id = new_job(c)
    wait_for(lambda: Job.objects.get(pk=job_id).is_terminal, "the job to end")
    wait_for(lambda: WebhookDelivery.objects.filter(attempts__gte=2).exists(), "a delivery to be retried while down")
    head = WebhookDelivery.objects.order_by("id").first()
    assert head is not None and head.status == DeliveryStatus.PENDING
    assert "no answer" in head.last_error and head.last_status_code is None
    later = WebhookDelivery.objects.exclude(pk=head.pk)
    assert later.exists() and not later.filter(attempts__gt=0).exists(), "later events wait behind the first"

    receiver.start()
    wait_for(lambda: all_settled(job_id), "the deliveries to go through once the receiver is up")
    assert receiver.event_ids() == status_event_ids(job_id), "every event once, in order, after the outage"
    log = c.get(f"/api/v1/webhooks/{created['id']}/deliveries?status=delivered").json()["results"]
    first = log[-1]
    assert first["attempts"] >= 2 and first["attempt_log"][0]["status_code"] is None
    assert first["attempt_log"][-1]["status_code"] == 200


def test_a_delivery_given_up_lets_the_next_ones_go(
    local_receivers: None, settings: Any, receiver: Receiver, make_actor: Any
) -> None:
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    receiver.answer_status = 500
    c, endpoint = owner_with_endpoint(make_actor, receiver.start().url)
    job_id = new_job(c)
    lifecycle.job_transition(job_id=job_id, to=JobStatus.CANCELLED, reason="no longer needed")
    assert len(status_event_ids(job_id)) == 2
    for _ in range(3):  # what the backoff's scheduled tasks do, run here as each comes due
        wait_for(lambda: delivery.endpoints_due() == [endpoint["id"]], "the retry to come due")
        delivery.deliver_due(endpoint["id"])
    first, second = WebhookDelivery.objects.order_by("id")
    assert (first.status, first.attempts, first.last_status_code) == (DeliveryStatus.FAILED, 3, 500)
    assert second.attempts >= 1, "the next event went once the first was given up"
    at = [datetime.fromisoformat(a["at"]) for a in first.attempt_log]
    waits = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(at)]
    assert waits[0] >= 0.05 and waits[1] >= 0.1, f"the backoff doubles: {waits}"


def test_an_event_is_queued_once_per_endpoint_and_sent_once_by_concurrent_senders(
    local_receivers: None, receiver: Receiver, make_actor: Any
) -> None:
    receiver.answer_delay_s = 0.3
    c, endpoint = owner_with_endpoint(make_actor, receiver.start().url)
    job_id = new_job(c)
    events = list(JobEvent.objects.filter(job_id=job_id, kind=EventKind.STATUS).select_related("job"))
    job_events_journaled.send(sender=JobJournal, events=events)  # the same events journaled again
    assert WebhookDelivery.objects.count() == len(events) == 1

    def send() -> None:
        try:
            delivery.deliver_due(endpoint["id"])
        finally:
            connection.close()  # this thread's own

    senders = [threading.Thread(target=send) for _ in range(3)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    assert receiver.event_ids() == status_event_ids(job_id), "three senders at once, one delivery"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://127.0.0.1/hook", "a loopback address"),
        ("https://localhost:8443/hook", "a loopback address"),
        ("https://10.1.2.3/hook", "a private address"),
        ("https://192.168.0.7/hook", "a private address"),
        ("https://169.254.169.254/latest/meta-data", "a link-local address"),
        ("https://[::1]/hook", "a loopback address"),
        ("https://[::ffff:127.0.0.1]/hook", "a loopback address"),
        ("http://93.184.215.14/hook", "must be an https:// URL"),
    ],
)
def test_endpoints_inside_the_services_network_are_refused(url: str, reason: str, make_actor: Any) -> None:
    c = client_for(make_actor("acme", scopes=("admin",)).token)
    r = c.post("/api/v1/webhooks", {"url": url}, format="json")
    assert r.status_code == 400, r.content
    [detail] = r.json()["error"]["details"]
    assert detail["field"] == "url" and reason in detail["message"]
    if "address" in reason:
        assert "WEBHOOK_ALLOWED_NETWORKS" in detail["message"]  # the fix, for the operator
    assert c.get("/api/v1/webhooks").json()["results"] == []


def test_an_allowed_network_admits_a_local_receiver(settings: Any, make_actor: Any) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    c = client_for(make_actor("acme", scopes=("admin",)).token)
    assert c.post("/api/v1/webhooks", {"url": "https://10.1.2.3/hook"}, format="json").status_code == 201
    assert c.post("/api/v1/webhooks", {"url": "https://192.168.0.7/hook"}, format="json").status_code == 400


def test_tenants_see_and_receive_only_their_own(local_receivers: None, make_actor: Any) -> None:
    acme, globex = make_actor("acme", scopes=("admin",)), make_actor("globex", scopes=("admin",))
    a, g = client_for(acme.token), client_for(globex.token)
    acme_hook = register(a, "http://127.0.0.1:9/acme")
    globex_job = new_job(g)
    assert WebhookDelivery.objects.count() == 0, "another tenant's job events are not queued for acme"
    acme_job = new_job(a)
    assert list(WebhookDelivery.objects.values_list("event_id", flat=True)) == status_event_ids(acme_job)
    assert globex_job != acme_job

    assert g.get("/api/v1/webhooks").json()["results"] == []
    assert g.get(f"/api/v1/webhooks/{acme_hook['id']}").status_code == 404
    assert g.get(f"/api/v1/webhooks/{acme_hook['id']}/deliveries").status_code == 404
    assert g.delete(f"/api/v1/webhooks/{acme_hook['id']}").status_code == 404
    assert a.get(f"/api/v1/webhooks/{acme_hook['id']}").status_code == 200

    member = client_for(make_actor("initech").token)  # jobs:read and jobs:write, no admin
    refused = member.get("/api/v1/webhooks")
    assert refused.status_code == 403 and "admin scope" in refused.json()["error"]["message"]


def test_deleting_an_endpoint_stops_its_deliveries_and_is_audited(local_receivers: None, make_actor: Any) -> None:
    owner = make_actor("acme", scopes=("admin",))
    c = client_for(owner.token)
    hook = register(c, "http://127.0.0.1:9/hook")
    new_job(c)
    assert WebhookDelivery.objects.count() == 1
    assert c.delete(f"/api/v1/webhooks/{hook['id']}").status_code == 204
    assert WebhookDelivery.objects.count() == 0
    new_job(c)
    assert WebhookDelivery.objects.count() == 0
    actions = list(AuditLog.objects.filter(tenant=owner.tenant, target=hook["id"]).values_list("action", flat=True))
    assert sorted(actions) == ["webhook.create", "webhook.delete"]


def test_an_address_refused_after_registration_is_not_called(
    local_receivers: None, settings: Any, receiver: Receiver, make_actor: Any
) -> None:
    """The name is resolved and checked again before each attempt: an endpoint that now points
    inside the service's network (or whose network an operator took off the list) is not called."""
    c, endpoint = owner_with_endpoint(make_actor, receiver.start().url)
    new_job(c)
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    delivery.deliver_due(endpoint["id"])
    [refused] = c.get(f"/api/v1/webhooks/{endpoint['id']}/deliveries").json()["results"]
    assert refused["status"] == "pending" and refused["attempts"] == 1
    assert refused["last_error"].startswith("refused: the URL resolves to 127.0.0.1, a loopback address")
    assert receiver.received == []


def test_the_django_admin_lists_deliveries_and_hides_secrets(
    local_receivers: None, receiver: Receiver, make_actor: Any, admin_client: Any
) -> None:
    c, endpoint = owner_with_endpoint(make_actor, receiver.start().url)
    job_id = new_job(c)
    delivery.deliver_due(endpoint["id"])
    listing = admin_client.get("/admin/webhooks/webhookdelivery/").content.decode()
    assert f"{job_id}:1" in listing and "delivered" in listing
    secret = WebhookEndpoint.objects.get(pk=endpoint["id"]).secret
    page = admin_client.get(f"/admin/webhooks/webhookendpoint/{endpoint['id']}/change/")
    assert page.status_code == 200 and receiver.url in page.content.decode()
    assert secret not in page.content.decode()


@pytest.fixture()
def localhost_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """A certificate for ``localhost`` that the sender trusts (in place of a public CA's); the
    receiver's server-side context serving it."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
            *("-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost"),
        ],
        check=True,
        capture_output=True,
    )
    monkeypatch.setattr(sender, "tls_context", lambda: ssl.create_default_context(cafile=str(cert)))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return server


def test_https_goes_to_the_checked_address_and_verifies_the_host_name(
    settings: Any, localhost_tls: ssl.SSLContext, make_actor: Any
) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]  # localhost, either family
    receiver = Receiver(tls=localhost_tls).start()
    try:
        c, by_name = owner_with_endpoint(make_actor, f"https://localhost:{receiver.port}/hook")
        job_id = new_job(c)
        delivery.deliver_due(by_name["id"])
        assert receiver.event_ids() == status_event_ids(job_id)
        assert verify(
            by_name["secret"],
            receiver.received[0].headers["Jigsaw-Timestamp"],
            receiver.received[0].body,
            receiver.received[0].headers["Jigsaw-Signature"],
        )

        # The same server by address: its certificate names localhost, not 127.0.0.1.
        by_address = register(c, f"https://127.0.0.1:{receiver.port}/hook")
        new_job(c)
        delivery.deliver_due(by_address["id"])
        [failed] = c.get(f"/api/v1/webhooks/{by_address['id']}/deliveries").json()["results"][-1:]
        assert "CERTIFICATE_VERIFY_FAILED" in failed["last_error"] and failed["status"] == "pending"
        assert len(receiver.received) == 1, "nothing was sent over the connection that failed verification"
    finally:
        receiver.stop()


def test_deleting_an_endpoint_mid_delivery_ends_its_sender_quietly(
    local_receivers: None, receiver: Receiver, make_actor: Any
) -> None:
    receiver.answer_delay_s = 0.5
    c, endpoint = owner_with_endpoint(make_actor, receiver.start().url)
    new_job(c)
    outcome: list[str] = []

    def send() -> None:
        try:
            outcome.append(delivery.deliver_due(endpoint["id"]))
        finally:
            connection.close()

    sending = threading.Thread(target=send)
    sending.start()
    assert receiver.request_started.wait(timeout=30), "the delivery reached the receiver"
    assert c.delete(f"/api/v1/webhooks/{endpoint['id']}").status_code == 204
    sending.join()
    assert outcome == ["sent"] and not WebhookDelivery.objects.exists()
