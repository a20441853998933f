"""Taking the model out from the job page, in a real headless Chromium against the live server:
a real job's checkpoints each have a Download button, and clicking it saves the checkpoint's
model as a tar of a Hugging Face directory; a simulated job's checkpoints have none."""

from __future__ import annotations

import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenants.models import Tenant
from tests.checkpoint_jobs import ended_job, serving_trained_job
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.helpers import off_loop
from tests.e2e.test_dashboard import make_member, real_errors, sign_in
from webapp.jobs.models import EngineMode

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOB_ID = str(uuid.uuid4())


@pytest.fixture(scope="module")
def service_root(tmp_path_factory: pytest.TempPathFactory, tiny_policy_cache: Path) -> Iterator[Path]:
    yield from serving_trained_job(tmp_path_factory, JOB_ID, tiny_policy_cache)


def job_of(slug: str, name: str, mode: str, job_id: str | None = None) -> str:
    return off_loop(lambda: str(ended_job(Tenant.objects.get(slug=slug), job_id=job_id, name=name, mode=mode).pk))


def test_download_a_checkpoint_from_the_job_page(
    browser: Any, live_server_url: str, service_root: Path, tmp_path: Path
) -> None:
    off_loop(lambda: make_member("alice", "acme"))
    job_of("acme", "e2e-tiny-real", EngineMode.REAL, JOB_ID)
    simulated = job_of("acme", "e2e-simulated", EngineMode.SIMULATED)
    base = live_server_url
    page, errors = sign_in(browser, base, "alice")

    page.goto(f"{base}/jobs/{JOB_ID}")
    page.get_by_role("heading", name="e2e-tiny-real").wait_for()
    button = page.get_by_test_id("download-checkpoint")
    button.wait_for()
    assert button.count() == 1 and button.get_attribute("data-step") == "1"
    assert button.inner_text() == "Download"
    page.get_by_test_id("checkpoints-panel").screenshot(path=str(ARTIFACTS / "checkpoint-download.png"))
    with page.expect_download() as started:
        button.click()
    download = started.value
    assert download.suggested_filename == "e2e-tiny-real-step-1.tar"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    model = service_root / JOB_ID / "step-000001" / "model"
    with tarfile.open(saved) as tar:
        names = sorted(tar.getnames())
        weights = tar.extractfile("e2e-tiny-real-step-1/model.safetensors")
        assert weights is not None and weights.read() == (model / "model.safetensors").read_bytes()
    assert names == sorted(f"e2e-tiny-real-step-1/{p.name}" for p in model.iterdir())

    page.goto(f"{base}/jobs/{simulated}")
    page.get_by_role("heading", name="e2e-simulated").wait_for()
    page.get_by_test_id("checkpoint-row").first.wait_for()
    assert page.get_by_test_id("download-checkpoint").count() == 0  # no weights, no button
    assert page.get_by_test_id("clone-from-checkpoint").count() == 1
    assert real_errors(errors) == []
