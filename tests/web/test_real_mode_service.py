"""The service in real mode, end to end: a tenant submits a tiny preset through the API, the
engine trains it for real, and the job page's data are the job's own (metrics, samples)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from tenants.models import Quota
from webapp import engine_gateway
from webapp.jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture()
def real_engine(tmp_path: Path) -> Iterator[None]:
    before = (settings.ENGINE_MODE, settings.ENGINE_CLUSTER, settings.ENGINE_REAL_CACHE_DIR)
    settings.ENGINE_MODE = "real"
    settings.ENGINE_CLUSTER = {"num_nodes": 1, "devices_per_node": 2, "device_type": "cpu"}
    settings.ENGINE_REAL_CACHE_DIR = str(tmp_path / "policies")
    engine_gateway.reset_engine_host()
    yield
    settings.ENGINE_MODE, settings.ENGINE_CLUSTER, settings.ENGINE_REAL_CACHE_DIR = before
    engine_gateway.reset_engine_host()


def _run_to_end(c: APIClient, spec: dict[str, Any], *, within_s: float) -> Job:
    """Submit ``spec`` and wait (at most ``within_s``) until the job succeeds or fails."""
    r = c.post("/api/v1/jobs", {"spec": spec}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    assert r.status_code == 201, r.content
    job_id = r.json()["id"]
    deadline = time.monotonic() + within_s
    while Job.objects.get(pk=job_id).status not in ("succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.5)
    return Job.objects.get(pk=job_id)


def test_a_tiny_preset_trains_for_real_through_the_api(
    celery_worker_thread: Any, real_engine: None, make_actor: Any
) -> None:
    actor = make_actor("acme")
    Quota.objects.filter(tenant=actor.tenant).update(guaranteed_gpus={"cpu": 2})
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {actor.token}")
    presets = {p["name"]: p["spec"] for p in c.get("/api/v1/presets").json()["results"]}
    assert presets["math-grpo"]["model"] == "tiny-qwen2-1m"  # real mode offers what can run here
    spec = {**presets["math-grpo"], "data": {"train_batch_size": 8}, "trainer": {"total_steps": 2}}

    too_big = c.post(
        "/api/v1/jobs", {"spec": {**spec, "model": "qwen3-0.6b"}}, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert too_big.status_code == 400 and too_big.json()["error"]["details"][0]["field"] == "spec.model"

    job = _run_to_end(c, spec, within_s=180)
    job_id = str(job.pk)
    assert job.status == "succeeded", job.status_reason
    series = c.get(f"/api/v1/jobs/{job_id}/metrics").json()["series"]
    assert [step for step, _ in series["critic/score/mean"]] == [1.0, 2.0]
    samples = c.get(f"/api/v1/jobs/{job_id}/samples").json()["results"]
    assert {s["step"] for s in samples} == {1, 2}
    assert all(s["prompt"] and 0.0 <= s["reward"] <= 1.0 for s in samples)
    assert c.get(f"/api/v1/jobs/{job_id}/samples?step=2").json()["results"][0]["step"] == 2
    assert job.gpu_seconds > 0  # cores, billed as the cluster's devices


def test_a_tenants_checkpoint_trains_by_path_through_the_api(
    celery_worker_thread: Any, real_engine: None, make_actor: Any, tmp_path: Path
) -> None:
    """The service's model folder holds a real-architecture checkpoint: the submit form offers
    it, the job trains it on vLLM (or the torch loop where vLLM is absent), and its samples are
    the prompts its own chat template wrote. A path outside the model folders is refused."""
    from jigsaw_engine.train.example_checkpoint import ExampleCheckpoint, build_example_checkpoint

    folder = build_example_checkpoint(tmp_path / "models" / "tiny-qwen3-arith", ExampleCheckpoint(warmup_steps=60))
    before = settings.ENGINE_MODEL_ROOTS
    settings.ENGINE_MODEL_ROOTS = [str(tmp_path / "models")]
    try:
        actor = make_actor("acme")
        Quota.objects.filter(tenant=actor.tenant).update(guaranteed_gpus={"cpu": 2})
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {actor.token}")
        presets = {p["name"]: p["spec"] for p in c.get("/api/v1/presets").json()["results"]}
        spec = presets["checkpoint-tiny-qwen3-arith"]
        assert spec["model"] == {"path": str(folder.resolve())}
        spec = {**spec, "data": {"train_batch_size": 8}, "trainer": {"total_steps": 2}}

        outside = c.post(
            "/api/v1/jobs",
            {"spec": {**spec, "model": {"path": "/etc"}}},
            format="json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )
        assert outside.status_code == 400
        (detail,) = outside.json()["error"]["details"]
        assert detail["field"] == "spec.model.path" and "ENGINE_MODEL_ROOTS" in detail["message"]

        job = _run_to_end(c, spec, within_s=240)
        job_id = str(job.pk)
        assert job.status == "succeeded", job.status_reason
        series = c.get(f"/api/v1/jobs/{job_id}/metrics").json()["series"]
        assert [step for step, _ in series["critic/score/mean"]] == [1.0, 2.0]
        samples = c.get(f"/api/v1/jobs/{job_id}/samples").json()["results"]
        assert samples and all(s["prompt"].startswith("<|im_start|>user\n") for s in samples)
    finally:
        settings.ENGINE_MODEL_ROOTS = before


def test_a_real_job_with_a_validation_set_reports_val_core_curves_through_the_api(
    celery_worker_thread: Any, real_engine: None, make_actor: Any, tmp_path: Path
) -> None:
    """``data.val_files`` names an uploaded dataset and ``trainer.test_freq`` 1: the job's
    metrics hold verl's ``val-core/<data_source>/reward/mean@1`` at step 0 (before training)
    and after each step, rewards in [0, 1], beside the training curves."""
    actor = make_actor("acme")
    Quota.objects.filter(tenant=actor.tenant).update(guaranteed_gpus={"cpu": 2})
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {actor.token}")
    rows = [
        {"prompt": f"Compute {a}+{b}.", "answer": str(a + b), "data_source": "arith"}
        for a in range(4)
        for b in range(3)
    ]
    with override_settings(DATASETS_DIR=str(tmp_path / "datasets")):
        content = "".join(json.dumps(r) + "\n" for r in rows)
        assert c.post("/api/v1/datasets", {"name": "arith-val", "content": content}, format="json").status_code == 201
        presets = {p["name"]: p["spec"] for p in c.get("/api/v1/presets").json()["results"]}
        spec = {
            **presets["math-grpo"],
            "data": {"train_batch_size": 8, "val_files": "dataset:arith-val"},
            "trainer": {"total_steps": 2, "test_freq": 1},
        }
        # Generous: the engine warms a policy up first, on cores other tests share (it took 76-125 s).
        job = _run_to_end(c, spec, within_s=300)
        job_id = str(job.pk)
    assert job.status == "succeeded", f"{job.status}: {job.status_reason}"
    series = c.get(f"/api/v1/jobs/{job_id}/metrics").json()["series"]
    curve = series["val-core/arith/reward/mean@1"]
    assert [step for step, _ in curve] == [0.0, 1.0, 2.0]
    assert all(0.0 <= value <= 1.0 for _, value in curve)
    assert [step for step, _ in series["critic/score/mean"]] == [1.0, 2.0]
    assert job.current_step == 2
