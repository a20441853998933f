"""Path traversal through dataset names, dataset references in specs, job ids and checkpoint
steps: each is refused with the field named, or is harmless (the name is a label and the file
lands in the tenant's own folder under a server-made name). Nothing is read or written outside
the datasets folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.utils import override_settings

from tests.engine.builders import make_spec
from tests.hostile.helpers import client_for, error_of, submit
from webapp.datasets.models import Dataset
from webapp.datasets.services import dataset_path, tenant_dir
from webapp.jobs.models import Job, JobCheckpoint

pytestmark = pytest.mark.django_db

ROWS = "\n".join(json.dumps({"prompt": f"What is {i}+{i}?", "answer": str(2 * i)}) for i in range(3))

HOSTILE_NAMES = [
    "../escape",
    "..",
    "a/../../b",
    "/etc/passwd",
    "C:\\Windows\\win.ini",
    "a\\..\\b",
    "%2e%2e%2fescape",
    "\uff0e\uff0e\uff0fescape",  # fullwidth ../
    "\u2024\u2024/escape",  # one-dot leaders
    "data\u200bset",  # zero-width space
    "caf\u0065\u0301",  # combining accent
    "\u0430dmin",  # Cyrillic a
    ".hidden",
    "",
    "x" * 101,
]


@pytest.fixture()
def root(tmp_path: Path) -> Iterator[Path]:
    """The datasets folder, inside a sandbox folder whose other files must stay untouched."""
    (tmp_path / "outside.jsonl").write_text("secret\n")
    with override_settings(DATASETS_DIR=str(tmp_path / "datasets")):
        yield tmp_path / "datasets"


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_dataset_name_is_refused_naming_the_rule(make_actor: Any, root: Path, name: str) -> None:
    before = files_under(root.parent)
    r = client_for(make_actor("acme").token).post("/api/v1/datasets", {"name": name, "content": ROWS}, format="json")
    assert r.status_code == 400, r.content
    detail = error_of(r)["details"][0]
    assert detail["field"] == "name"
    assert ("1-100 letters, digits" if name else "blank") in detail["message"], detail
    assert files_under(root.parent) == before and not Dataset.objects.exists()


@pytest.mark.parametrize(
    "filename", ["../../../../outside.jsonl", "/abs/outside.jsonl", "..\\..\\outside.jsonl", "sub/dir/outside.jsonl"]
)
def test_an_uploaded_file_name_with_a_path_lands_in_the_tenants_folder(
    make_actor: Any, root: Path, filename: str
) -> None:
    actor = make_actor("acme")
    client = client_for(actor.token)
    r = client.post("/api/v1/datasets", {"file": SimpleUploadedFile(filename, ROWS.encode())}, format="multipart")
    assert r.status_code == 201, r.content
    assert r.json()["name"] == "outside"  # the path is dropped: the name is a label only
    dataset = Dataset.objects.get()
    assert files_under(root) == {dataset_path(dataset)}
    assert dataset_path(dataset).parent == tenant_dir(actor.tenant.pk)
    assert (root.parent / "outside.jsonl").read_text() == "secret\n"


def test_a_multipart_name_field_with_a_path_is_refused(make_actor: Any, root: Path) -> None:
    client = client_for(make_actor("acme").token)
    upload = SimpleUploadedFile("ok.jsonl", ROWS.encode())
    r = client.post("/api/v1/datasets", {"file": upload, "name": "../outside"}, format="multipart")
    assert r.status_code == 400 and error_of(r)["details"][0]["field"] == "name"
    assert not root.exists() or not files_under(root)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/datasets/..",
        "/api/v1/datasets/..%2F..%2Foutside",
        "/api/v1/datasets/%2e%2e",
        "/api/v1/datasets/outside.jsonl",
        "/api/v1/datasets/%EF%BC%8E%EF%BC%8E",
    ],
)
def test_showing_or_deleting_by_a_hostile_name_finds_nothing(make_actor: Any, root: Path, path: str) -> None:
    client = client_for(make_actor("acme").token)
    assert client.get(path).status_code == 404
    assert client.delete(path).status_code == 404
    assert (root.parent / "outside.jsonl").read_text() == "secret\n"


def test_a_spec_can_name_only_the_tenants_own_datasets(make_actor: Any, root: Path) -> None:
    acme, globex = make_actor("acme"), make_actor("globex")
    assert (
        client_for(globex.token)
        .post("/api/v1/datasets", {"name": "theirs", "content": ROWS}, format="json")
        .status_code
        == 201
    )
    theirs = dataset_path(Dataset.objects.get(name="theirs"))
    client = client_for(acme.token)
    assert client.post("/api/v1/datasets", {"name": "mine", "content": ROWS}, format="json").status_code == 201
    mine = dataset_path(Dataset.objects.get(name="mine"))
    for train_files in [
        "/etc/passwd",
        str(root.parent / "outside.jsonl"),
        str(theirs),  # another tenant's stored file
        f"{tenant_dir(acme.tenant.pk)}/../{globex.tenant.pk}/{theirs.name}",
        f"{tenant_dir(acme.tenant.pk)}/../{acme.tenant.pk}/{mine.name}",  # own file, but by a detour
        "dataset:../theirs",
        "dataset:../../outside",
        "dataset:theirs",
        "file:///etc/passwd",
    ]:
        r = submit(client, {"spec": make_spec(data={"train_files": train_files})})
        assert r.status_code == 400, (train_files, r.content)
        assert error_of(r)["details"][0]["field"] == "spec.data.train_files", train_files
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs/..%2F..%2Fetc%2Fpasswd",
        "/api/v1/jobs/../../etc/passwd/checkpoints",
        "/api/v1/jobs/--------------------------------/checkpoints",
        "/api/v1/jobs/%2e%2e/checkpoints",
        "/api/v1/jobs/00000000-0000-0000-0000-000000000000/checkpoints",
    ],
)
def test_job_and_checkpoint_lookups_take_only_ids(make_actor: Any, path: str) -> None:
    assert client_for(make_actor("acme").token).get(path).status_code == 404


def test_a_clone_names_a_checkpoint_by_its_step_number_only(make_actor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from webapp.jobs import task_queue

    monkeypatch.setattr(task_queue, "admission_pass_soon", lambda: None)
    actor = make_actor("acme")
    client = client_for(actor.token)
    job_id = submit(client, {"spec": make_spec(trainer={"total_steps": 4, "save_freq": 2})}).json()["id"]
    JobCheckpoint.objects.create(job_id=job_id, step=2)
    for step in ["../2", "step-000002", "/tmp/ckpt", "2/../../x", -1, 1.5, 10**30]:
        r = client.post(f"/api/v1/jobs/{job_id}/clone", {"checkpoint_step": step}, format="json")
        assert r.status_code == 400, (step, r.content)
        assert error_of(r)["details"][0]["field"] == "checkpoint_step", step
    ok = client.post(f"/api/v1/jobs/{job_id}/clone", {"checkpoint_step": 2}, format="json")
    assert ok.status_code == 201, ok.content
