"""Taking the model out: GET /api/v1/jobs/<id>/checkpoints/<step>/download streams a real
job's checkpoint as a tar of a Hugging Face directory that transformers loads, to the job's
tenant only; a simulated job, an unknown step and an old checkpoint are refused with the fix."""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from rest_framework.test import APIClient
from transformers import AutoModelForCausalLM, AutoTokenizer

from tenants.models import Role
from tenants.services import membership_add, tenant_create
from tests.checkpoint_jobs import ended_job, serving_trained_job
from webapp.jobs.models import EngineMode, Job
from webapp.jobs.services.checkpoint_download import CHUNK

pytestmark = pytest.mark.django_db(transaction=True)

JOB_ID = str(uuid.uuid4())


@pytest.fixture(scope="module")
def service_root(tmp_path_factory: pytest.TempPathFactory, tiny_policy_cache: Path) -> Iterator[Path]:
    yield from serving_trained_job(tmp_path_factory, JOB_ID, tiny_policy_cache)


def client_for(token: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


def download(c: APIClient, job_id: Any, step: int, query: str = "") -> Any:
    return c.get(f"/api/v1/jobs/{job_id}/checkpoints/{step}/download{query}")


def test_a_checkpoint_downloads_as_a_directory_transformers_loads(
    service_root: Path, make_actor: Any, tmp_path: Path
) -> None:
    actor = make_actor("acme")
    ended_job(actor.tenant, job_id=JOB_ID)
    c = client_for(actor.token)
    listed = c.get(f"/api/v1/jobs/{JOB_ID}/checkpoints").json()["results"]
    assert [(cp["step"], cp["download_url"]) for cp in listed] == [(1, f"/api/v1/jobs/{JOB_ID}/checkpoints/1/download")]

    r = download(c, JOB_ID, 1)

    assert r.status_code == 200
    assert r.streaming and r["Content-Type"] == "application/x-tar"
    assert r["Content-Disposition"] == 'attachment; filename="tiny-download-step-1.tar"'
    chunks = list(r.streaming_content)
    body = b"".join(chunks)
    assert int(r["Content-Length"]) == len(body)
    assert max(len(chunk) for chunk in chunks) <= CHUNK < len(body)  # never the model at once
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path, filter="data")
    assert all(name.startswith("tiny-download-step-1/") for name in names)
    folder = tmp_path / "tiny-download-step-1"
    on_disk = service_root / JOB_ID / "step-000001" / "model"
    assert {p.name for p in folder.iterdir()} == {p.name for p in on_disk.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= set(
        p.name for p in folder.iterdir()
    )
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    saved = torch.load(service_root / JOB_ID / "step-000001" / "state.pt", weights_only=False)["trainer"]["model"]
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in saved.items())
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt == "<|user|>2+2?<|assistant|>"


def test_only_the_jobs_tenant_with_the_read_scope_downloads(service_root: Path, make_actor: Any) -> None:
    owner, other = make_actor("acme"), make_actor("globex")
    ended_job(owner.tenant, job_id=JOB_ID)
    assert download(APIClient(), JOB_ID, 1).status_code == 401
    assert download(client_for(other.token), JOB_ID, 1).status_code == 404
    write_only = make_actor("initech", scopes=("jobs:write",))
    ended_job(write_only.tenant)
    refused = download(client_for(write_only.token), Job.objects.get(tenant=write_only.tenant).pk, 1)
    assert refused.status_code == 403 and "jobs:read" in refused.json()["error"]["message"]


def test_a_signed_in_member_of_two_tenants_names_the_tenant_in_the_link(service_root: Path, make_actor: Any) -> None:
    first = make_actor("acme")
    second = tenant_create(slug="globex", name="Globex", quota={"max_gpus_per_job": 8})
    membership_add(tenant=second, user=first.user, role=Role.MEMBER)
    ended_job(second, job_id=JOB_ID)
    browser = APIClient()
    browser.force_login(first.user)
    assert download(browser, JOB_ID, 1).status_code == 404  # the first tenant's, by default
    r = download(browser, JOB_ID, 1, "?tenant=globex")
    assert r.status_code == 200 and r["Content-Type"] == "application/x-tar"
    r.close()


def test_a_simulated_job_has_no_weights_and_says_how_to_get_some(service_root: Path, make_actor: Any) -> None:
    actor = make_actor("acme")
    job = ended_job(actor.tenant, mode=EngineMode.SIMULATED, steps=(5, 10))
    c = client_for(actor.token)
    assert [cp["download_url"] for cp in c.get(f"/api/v1/jobs/{job.pk}/checkpoints").json()["results"]] == [None, None]
    r = download(c, job.pk, 10)
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["code"] == "no_weights" and "simulated engine" in error["message"]
    [detail] = error["details"]
    assert detail["field"] == "engine_mode" and "ENGINE_MODE=real" in detail["message"]


def test_an_unknown_step_names_the_steps_there_are(service_root: Path, make_actor: Any) -> None:
    actor = make_actor("acme")
    ended_job(actor.tenant, job_id=JOB_ID)
    r = download(client_for(actor.token), JOB_ID, 2)
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["code"] == "checkpoint_not_found" and "step 2" in error["message"]
    assert error["details"] == [{"field": "step", "message": "must be one of [1]"}]


def test_a_checkpoint_from_before_exports_is_refused_with_a_way_out(
    service_root: Path, make_actor: Any, tmp_path: Path
) -> None:
    actor = make_actor("acme")
    job = ended_job(actor.tenant)
    (service_root / str(job.pk) / "step-000001").mkdir(parents=True)
    try:
        r = download(client_for(actor.token), job.pk, 1)
    finally:
        (service_root / str(job.pk) / "step-000001").rmdir()
        (service_root / str(job.pk)).rmdir()
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["code"] == "no_weights" and "training state only" in error["message"]
    assert error["details"][0]["field"] == "step" and "clone" in error["details"][0]["message"]


def test_under_asgi_the_archive_goes_out_a_chunk_at_a_time_and_is_never_held_whole(
    service_root: Path, make_actor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the service runs (uvicorn): an async stream, never a sync one that Django would read
    whole before sending; what the server holds at once stays a few chunks of a 3 MB model."""
    import tracemalloc
    import warnings

    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    from webapp.jobs.services import checkpoint_download

    actor = make_actor("acme")
    ended_job(actor.tenant, job_id=JOB_ID)
    monkeypatch.setattr(checkpoint_download, "CHUNK", 64 * 1024)
    client = AsyncClient()

    async def fetch() -> tuple[int, int, int, int]:
        response = await client.get(
            f"/api/v1/jobs/{JOB_ID}/checkpoints/1/download", headers={"Authorization": f"Bearer {actor.token}"}
        )
        assert response.status_code == 200
        assert response.is_async  # a sync iterator Django would read whole under ASGI
        received, largest = 0, 0
        tracemalloc.start()
        async for chunk in response.streaming_content:
            received, largest = received + len(chunk), max(largest, len(chunk))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return int(response["Content-Length"]), received, largest, peak

    with warnings.catch_warnings():
        # Django warns where it must read a sync stream whole before sending it under ASGI.
        warnings.filterwarnings("error", message="StreamingHttpResponse must consume")
        total, received, largest, peak = async_to_sync(fetch)()
    assert received == total > 3_000_000
    assert largest <= 64 * 1024
    assert peak < total / 8, f"held {peak} bytes at once of a {total}-byte archive"
