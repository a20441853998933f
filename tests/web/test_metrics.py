"""/metrics as Prometheus and an operator see it: real requests move the latency histogram of
their route (the URL's name, not its path), jobs and queues are counted from the database, the
Celery tasks' passes and failures are timed and counted, samples from several processes add up,
and nobody outside the allowed networks reads it without the token."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from celery import shared_task
from channels.testing.websocket import WebsocketCommunicator
from django.db import transaction
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from tests.django_fixtures import TEST_NAMESPACE
from tests.engine.builders import make_spec
from webapp.asgi import application
from webapp.jobs import journal, task_queue, tasks
from webapp.jobs.models import Job
from webapp.jobs.services.submit import job_submit
from webapp.observability import scrape

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def samples(client: Client | None = None, **headers: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


def api(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def test_requests_move_their_routes_histogram_and_jobs_are_counted(make_actor, engine_speed) -> None:
    from webapp.celery_app import app

    with app.connection_for_write() as conn:  # earlier tests' tasks may still wait there
        conn.default_channel.queue_purge(TEST_NAMESPACE)
    acme = api(make_actor("acme").token)
    before = samples()

    created = acme.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert created.status_code == 201
    job_id = created.json()["id"]
    assert acme.get(f"/api/v1/jobs/{job_id}").status_code == 200
    assert acme.get(f"/api/v1/jobs/{uuid.uuid4()}").status_code == 404
    after = samples()

    count = "jigsaw_http_request_duration_seconds_count"
    assert value(after, count, route="job-list", method="POST", status="201") == (
        value(before, count, route="job-list", method="POST", status="201") + 1
    )
    # Both reads fall under one route, told apart by status; no series names a job id.
    assert value(after, count, route="job-detail", method="GET", status="200") == (
        value(before, count, route="job-detail", method="GET", status="200") + 1
    )
    assert value(after, count, route="job-detail", method="GET", status="404") == (
        value(before, count, route="job-detail", method="GET", status="404") + 1
    )
    assert not [key for key in after if any(job_id in v for _, v in key[1])]
    assert value(after, "jigsaw_http_request_duration_seconds_sum", route="job-list", method="POST", status="201") > (
        value(before, "jigsaw_http_request_duration_seconds_sum", route="job-list", method="POST", status="201")
    )

    # No worker runs here: the job waits for admission, and an admission task sent now waits in
    # Redis (the create's own is shared with any create of the last second, an earlier test's too).
    task_queue.admission_pass()
    after = samples()
    assert value(after, "jigsaw_jobs", state="queued") == 1
    assert value(after, "jigsaw_jobs", state="running") == 0
    assert value(after, "jigsaw_tenant_queue_length", tenant="acme") == 1
    assert 0 <= value(after, "jigsaw_tenant_queue_oldest_wait_seconds", tenant="acme") < 60
    assert value(after, "jigsaw_celery_queue_depth", queue=TEST_NAMESPACE) >= 1
    assert value(after, "jigsaw_engine_up") == 1
    assert value(after, "jigsaw_engine_devices", state="total", device_type="h100") == 8


def test_admission_and_event_pump_passes_are_timed(make_actor, engine_speed) -> None:
    acme = api(make_actor("acme").token)
    acme.post("/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    before = samples()

    assert tasks.admission_tick() == 1  # the task's body, run here as the worker would
    tasks.pump_engine_events()
    after = samples()

    assert (
        value(after, "jigsaw_admission_pass_seconds_count") == value(before, "jigsaw_admission_pass_seconds_count") + 1
    )
    assert value(after, "jigsaw_admission_admitted_jobs_total") == (
        value(before, "jigsaw_admission_admitted_jobs_total") + 1
    )
    assert value(after, "jigsaw_event_pump_pass_seconds_count") == (
        value(before, "jigsaw_event_pump_pass_seconds_count") + 1
    )
    assert value(after, "jigsaw_event_pump_last_success_timestamp_seconds") > (
        value(before, "jigsaw_event_pump_last_success_timestamp_seconds")
    )
    assert value(after, "jigsaw_tenant_queue_length", tenant="acme") == 0  # admitted: no longer waiting


@shared_task(name="tests.metrics.always_fails")
def _always_fails() -> None:
    raise RuntimeError("this task fails on purpose")


def test_a_failing_celery_task_is_counted_by_name() -> None:
    before = samples()
    result = _always_fails.apply()
    assert result.failed()
    after = samples()
    name = "jigsaw_celery_task_failures_total"
    assert value(after, name, task="tests.metrics.always_fails") == (
        value(before, name, task="tests.metrics.always_fails") + 1
    )


@override_settings(METRICS_TOKEN="scrape-secret", METRICS_ALLOWED_NETWORKS=[])
def test_refused_without_the_token_in_the_api_error_shape() -> None:
    bare = Client().get("/metrics")
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "not_authenticated"
    assert bare.json()["error"]["details"][0]["field"] == "Authorization"
    assert bare["WWW-Authenticate"].startswith("Bearer")

    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer guessed")
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "authentication_failed"

    assert "jigsaw_jobs" in str(samples(HTTP_AUTHORIZATION="Bearer scrape-secret"))


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_NETWORKS=["10.0.0.0/8"])
def test_only_the_allowed_networks_read_it_without_a_token() -> None:
    outside = Client(REMOTE_ADDR="192.0.2.7").get("/metrics")
    assert outside.status_code == 403
    assert outside.json()["error"]["details"][0]["field"] == "METRICS_ALLOWED_NETWORKS"
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200


@pytest.mark.asyncio
async def test_websocket_clients_and_delivery_lag(make_actor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)  # events written here only
    acme = await sync_to_async(make_actor)("acme")
    scrape_now = sync_to_async(samples)
    lag = "jigsaw_websocket_delivery_lag_seconds_count"
    before = await scrape_now()

    ws = WebsocketCommunicator(
        application, "/ws/v1/tenant", headers=[(b"authorization", f"Bearer {acme.token}".encode())]
    )
    assert (await ws.connect(timeout=5))[0]
    assert (await ws.receive_json_from(timeout=5))["events"] == []
    assert value(await scrape_now(), "jigsaw_websocket_clients", stream="tenant") == (
        value(before, "jigsaw_websocket_clients", stream="tenant") + 1
    )

    @sync_to_async
    def submit_and_log() -> None:
        job = job_submit(tenant=acme.tenant, user=acme.user, name="ws", spec=make_spec())
        with transaction.atomic():
            locked = Job.objects.select_for_update().get(pk=job.pk)
            for i in range(3):
                journal.append_event(locked, "log", {"level": "info", "message": f"line {i}"})

    await submit_and_log()
    received = 0
    while received < 4:  # the job's first status event and the three lines
        frame = await ws.receive_json_from(timeout=5)
        received += len(frame.get("events", []))
    during = await scrape_now()
    assert value(during, lag) == value(before, lag) + 4
    assert (
        value(during, "jigsaw_websocket_delivery_lag_seconds_sum")
        - value(before, "jigsaw_websocket_delivery_lag_seconds_sum")
        < 4 * 5.0
    )

    await ws.disconnect()
    assert value(await scrape_now(), "jigsaw_websocket_clients", stream="tenant") == (
        value(before, "jigsaw_websocket_clients", stream="tenant")
    )


_CHILD = """
import django
django.setup()
from django.test import Client
for _ in range(3):
    assert Client().get("/api/v1/no-such-resource").status_code == 404
"""


def test_samples_of_several_processes_add_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two web processes write to the shared folder; the one that is scraped reports both."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    children = [subprocess.Popen([sys.executable, "-c", _CHILD], cwd=ROOT, env=env) for _ in range(2)]
    assert [child.wait(timeout=120) for child in children] == [0, 0]

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setattr(scrape, "MULTIPROCESS", True)
    found = samples()
    assert (
        value(found, "jigsaw_http_request_duration_seconds_count", route="<unmatched>", method="GET", status="404") == 6
    )
    assert value(found, "jigsaw_jobs", state="queued") == 0  # read at scrape time, beside the files
