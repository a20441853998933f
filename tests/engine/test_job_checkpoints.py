"""A deleted job's checkpoint folder: removed with everything in it, only ever under the root."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from jigsaw_engine.api import remove_job_checkpoints


def test_the_jobs_folder_goes_and_its_neighbours_stay(tmp_path: Path) -> None:
    job_id, other = str(uuid.uuid4()), str(uuid.uuid4())
    for step in (1, 2):
        folder = tmp_path / job_id / f"step-{step:06d}"
        folder.mkdir(parents=True)
        (folder / "state.pt").write_bytes(b"x" * 100)
        (folder / "job.json").write_text("{}")
    (tmp_path / job_id / "latest").write_text("step-000002")
    (tmp_path / other).mkdir()
    (tmp_path / other / "latest").write_text("step-000001")

    removed = remove_job_checkpoints(tmp_path, job_id)

    assert (removed.files, removed.bytes) == (5, 2 * (100 + 2) + len("step-000002"))
    assert not (tmp_path / job_id).exists()
    assert (tmp_path / other / "latest").is_file()
    again = remove_job_checkpoints(tmp_path, job_id)  # a retried deletion finds nothing left
    assert (again.files, again.bytes) == (0, 0)


@pytest.mark.parametrize("bad", ["..", "../etc", "/tmp", "not-a-job"])
def test_an_id_that_is_not_a_job_id_is_refused(tmp_path: Path, bad: str) -> None:
    (tmp_path / "keep").mkdir()
    with pytest.raises(ValueError):
        remove_job_checkpoints(tmp_path / "keep", bad)
    assert (tmp_path / "keep").is_dir()
