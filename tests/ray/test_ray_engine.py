"""The engine as a detached, named Ray actor: any process reaches the same controller, and a
job submitted through the control plane runs to the end on it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from jigsaw_engine.api import EngineConfig, connect_ray_engine
from jigsaw_engine.contracts import EngineHost, EventKind
from tests.engine.builders import make_spec
from webapp import engine_gateway

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture()
def ray_engine(ray_cluster: None) -> Iterator[EngineHost]:
    config = EngineConfig.from_mapping({"num_nodes": 1, "devices_per_node": 8}, speed=float("inf"))
    host = connect_ray_engine(config, address=None)
    yield host
    host.shutdown_actor()  # type: ignore[attr-defined]


def wait_for_status(host: EngineHost, pipeline_id: str, status: str, timeout_s: float = 60) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = host.events_since(0).events
        if any(e.pipeline_id == pipeline_id and e.data.get("status") == status for e in events):
            return events
        time.sleep(0.1)
    raise AssertionError(f"{pipeline_id} never reached {status}")


def test_named_actor_is_shared_and_runs_pipelines(ray_engine: EngineHost) -> None:
    second = connect_ray_engine(
        EngineConfig.from_mapping({"num_nodes": 1, "devices_per_node": 8}, speed=float("inf")), address=None
    )
    assert second.engine_id == ray_engine.engine_id  # one controller for the whole cluster

    ray_engine.submit("p1", make_spec())
    events = wait_for_status(second, "p1", "succeeded")
    statuses = [e.data["status"] for e in events if e.kind is EventKind.STATUS]
    assert statuses == ["queued", "starting", "running", "succeeded"]
    assert [e.data["step"] for e in events if e.kind is EventKind.METRICS] == [1, 2, 3]


def test_invalid_spec_is_refused_through_ray(ray_engine: EngineHost) -> None:
    with pytest.raises(Exception, match=r"rollout\.n: must be >= 1, got 0"):
        ray_engine.submit("bad", make_spec(rollout={"n": 0}))


@pytest.mark.django_db(transaction=True)
def test_job_runs_on_the_ray_engine_end_to_end(ray_cluster, celery_worker_thread, make_actor) -> None:
    settings.ENGINE_BACKEND = "ray"
    settings.ENGINE_SPEED = float("inf")
    engine_gateway.reset_engine_host()
    try:
        owner = make_actor("acme")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {owner.token}")
        job_id = client.post(
            "/api/v1/jobs", {"spec": make_spec()}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
        ).json()["id"]
        deadline = time.monotonic() + 60
        job = {}
        while time.monotonic() < deadline:
            job = client.get(f"/api/v1/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.3)
        assert job["status"] == "succeeded", job
        series = client.get(f"/api/v1/jobs/{job_id}/metrics").json()["series"]
        assert [p[0] for p in series["perf/throughput"]] == [1.0, 2.0, 3.0]
        assert engine_gateway.describe_engine()["pipelines"] == {"succeeded": 1}
    finally:
        host = engine_gateway.engine_host()
        host.shutdown_actor()  # type: ignore[attr-defined]
        settings.ENGINE_BACKEND = "local"
        engine_gateway.reset_engine_host()
