"""Every job says which engine mode it ran under (simulated: the cost model's clock, nothing
trained; real: a model was trained), read-only, in the API and its schema; the cluster timeline
says the mode of its engine; jobs stored before the field get it from what they left behind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests.engine.builders import make_spec
from webapp import engine_gateway
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def submit(c: APIClient, spec: dict[str, Any]) -> dict[str, Any]:
    r = c.post("/api/v1/jobs", {"spec": spec}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    body: dict[str, Any] = r.json()
    return body


@pytest.fixture()
def real_mode() -> Iterator[None]:
    """The service switched to real mode (tiny models on this machine's cores); nothing runs."""
    before = (settings.ENGINE_MODE, settings.ENGINE_CLUSTER)
    settings.ENGINE_MODE = "real"
    settings.ENGINE_CLUSTER = {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"}
    engine_gateway.reset_engine_host()
    yield
    settings.ENGINE_MODE, settings.ENGINE_CLUSTER = before
    engine_gateway.reset_engine_host()


def test_a_job_keeps_the_mode_it_was_submitted_under(make_actor, engine_speed) -> None:
    c = client_for(make_actor("acme").token)
    simulated = submit(c, make_spec())
    assert simulated["engine_mode"] == "simulated"

    settings.ENGINE_MODE = "real"  # the service switched mode: a job already stored keeps its own
    try:
        assert c.get(f"/api/v1/jobs/{simulated['id']}").json()["engine_mode"] == "simulated"
    finally:
        settings.ENGINE_MODE = "simulated"
    listed = c.get("/api/v1/jobs").json()["results"]
    assert [(j["id"], j["engine_mode"]) for j in listed] == [(simulated["id"], "simulated")]
    clone = c.post(f"/api/v1/jobs/{simulated['id']}/clone", {"checkpoint_step": 0}, format="json")
    assert clone.status_code == 201, clone.content
    assert clone.json()["engine_mode"] == "simulated"


def test_a_job_submitted_in_real_mode_says_real(make_actor, real_mode: None) -> None:
    c = client_for(make_actor("acme").token)
    presets = {p["name"]: p["spec"] for p in c.get("/api/v1/presets").json()["results"]}
    job = submit(c, presets["math-grpo"])
    assert job["engine_mode"] == "real"
    assert Job.objects.get(pk=job["id"]).engine_mode == "real"


def test_the_mode_cannot_be_changed_through_the_api(make_actor, engine_speed) -> None:
    c = client_for(make_actor("acme").token)
    job = submit(c, make_spec())
    r = c.patch(f"/api/v1/jobs/{job['id']}", {"engine_mode": "real"}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["details"][0]["field"] == "engine_mode"
    assert c.get(f"/api/v1/jobs/{job['id']}").json()["engine_mode"] == "simulated"


def test_the_schema_documents_the_mode_as_read_only() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    schemas = schema["components"]["schemas"]
    field = schemas["JobOutput"]["properties"]["engine_mode"]
    assert field["readOnly"] is True and "no weights, samples or rewards" in field["description"]
    enum_name = field["allOf"][0]["$ref"].rsplit("/", 1)[1]
    assert schemas[enum_name]["enum"] == ["simulated", "real"]
    assert "engine_mode" in schemas["JobOutput"]["required"]
    assert "engine_mode" in schemas["ClusterTimelineOutput"]["required"]


def test_the_cluster_timeline_says_the_engines_mode(make_actor, engine_speed) -> None:
    c = client_for(make_actor("acme").token)
    assert c.get("/api/v1/cluster/timeline").json()["engine_mode"] == "simulated"


def _jobs_before_the_field(executor: MigrationExecutor) -> dict[str, str]:
    """Three jobs as the schema before the field stored them: one with samples, one with a
    step's metrics only, one that never finished a step. Returns name -> id."""
    apps = executor.loader.project_state([("jobs", "0004_samples_event_kind")]).apps
    OldJob = apps.get_model("jobs", "Job")
    Tenant = apps.get_model("tenants", "Tenant")
    tenant = Tenant.objects.create(slug="old", name="Old")
    ids = {}
    for name in ("sampled", "stepped", "unstarted"):
        job = OldJob.objects.create(
            tenant=tenant, name=name, spec={}, resolved_spec={}, num_gpus=1, total_steps=2, status="succeeded"
        )
        ids[name] = str(job.pk)
        if name != "unstarted":
            apps.get_model("jobs", "JobMetrics").objects.create(job=job, step=1, values={"timing_s/step": 1.0})
        if name == "sampled":
            apps.get_model("jobs", "JobEvent").objects.create(job=job, seq=1, kind="samples", data={"samples": []})
    return ids


@pytest.mark.parametrize("setting", ["simulated", "real"])
def test_jobs_stored_before_the_field_get_their_mode_from_what_they_left(setting: str) -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate([("jobs", "0004_samples_event_kind")])
    before = settings.ENGINE_MODE
    settings.ENGINE_MODE = setting
    try:
        ids = _jobs_before_the_field(MigrationExecutor(connection))
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    finally:
        settings.ENGINE_MODE = before
    modes = {name: Job.objects.get(pk=pk).engine_mode for name, pk in ids.items()}
    # Only a real engine sends samples; a step without any was simulated; the rest: the setting.
    assert modes == {"sampled": "real", "stepped": "simulated", "unstarted": setting}
