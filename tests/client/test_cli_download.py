"""``jigsaw jobs download`` and ``JigsawClient.download_checkpoint`` against the live server
(uvicorn, as the service runs): a real tiny job's checkpoint arrives as a Hugging Face
directory transformers loads, with progress; a simulated job, an unknown step and a directory
that is in the way are refused with the reason and the fix."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from jigsaw_client import ApiError, JigsawClient
from tests.checkpoint_jobs import ended_job, serving_trained_job
from webapp.jobs.models import EngineMode

pytestmark = pytest.mark.django_db(transaction=True)

JOB_ID = str(uuid.uuid4())


@pytest.fixture(scope="module")
def service_root(tmp_path_factory: pytest.TempPathFactory, tiny_policy_cache: Path) -> Iterator[Path]:
    yield from serving_trained_job(tmp_path_factory, JOB_ID, tiny_policy_cache)


@pytest.fixture()
def trained_job(service_root: Path, actor: Any) -> Path:
    """The checkpointed job, the tenant's; its step-1 model folder."""
    ended_job(actor.tenant, job_id=JOB_ID)
    return service_root / JOB_ID / "step-000001" / "model"


def test_the_cli_downloads_the_latest_checkpoint_into_a_directory_transformers_loads(
    jigsaw: Any, trained_job: Path, tmp_path: Path
) -> None:
    out = tmp_path / "my-model"

    done = jigsaw("jobs", "download", JOB_ID, "--out", str(out))

    assert done.code == 0, done.err
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(p.name for p in trained_job.iterdir())
    assert all((out / name).read_bytes() == (trained_job / name).read_bytes() for name in files)
    size = sum((trained_job / name).stat().st_size for name in files)
    assert done.out.startswith(f"job {JOB_ID} step 1: {len(files)} files, ") and done.out.rstrip().endswith(str(out))
    assert "downloading step 1: " in done.err and "(100%)" in done.err  # progress, a line a quarter off a terminal
    assert size > 3_000_000
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert model.num_parameters() > 500_000 and tokenizer.chat_template
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_the_client_reports_progress_and_refuses_what_it_cannot_download(
    live_server_url: str, actor: Any, trained_job: Path, tmp_path: Path
) -> None:
    simulated = str(uuid.uuid4())
    ended_job(actor.tenant, job_id=simulated, mode=EngineMode.SIMULATED)
    seen: list[tuple[int, int | None]] = []
    with JigsawClient(live_server_url, actor.token) as client:
        assert [c["download_url"] for c in client.list_checkpoints(simulated)] == [None]
        model = client.download_checkpoint(JOB_ID, tmp_path / "m", step=1, progress=lambda r, t: seen.append((r, t)))
        with pytest.raises(ApiError) as no_weights:
            client.download_checkpoint(simulated, tmp_path / "sim", step=1)
        with pytest.raises(ApiError) as unknown:
            client.download_checkpoint(JOB_ID, tmp_path / "unknown", step=9)
    assert model.step == 1 and "model.safetensors" in model.files
    received = [r for r, _ in seen]
    assert received == sorted(received) and received[-1] == seen[-1][1] == model.bytes
    assert no_weights.value.status == 409 and no_weights.value.code == "no_weights"
    assert no_weights.value.details[0]["field"] == "engine_mode"
    assert unknown.value.status == 404 and unknown.value.details == [{"field": "step", "message": "must be one of [1]"}]
    assert not (tmp_path / "sim").exists() and not (tmp_path / "unknown").exists()


def test_the_cli_names_the_steps_there_are_and_never_writes_over_a_directory(
    jigsaw: Any, trained_job: Path, tmp_path: Path
) -> None:
    unknown = jigsaw("jobs", "download", JOB_ID, "--step", "4", "--out", str(tmp_path / "m"))
    assert unknown.code == 1
    assert "no checkpoint at step 4 (checkpoint_not_found, HTTP 404)" in unknown.err
    assert "  step: must be one of [1]" in unknown.err

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    refused = jigsaw("jobs", "download", JOB_ID, "--out", str(taken))
    assert refused.code == 1 and "is not an empty directory; pass --out with a new directory" in refused.err
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
