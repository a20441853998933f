"""A job's checkpoint folder must be writable where the job runs: one that is not fails the
job when it is built, naming the folder and the host."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from jigsaw_engine.real.pipeline import check_checkpoint_folder


def test_a_writable_folder_is_made_and_left_empty(tmp_path: Path) -> None:
    folder = tmp_path / "shared" / "job-1"
    check_checkpoint_folder(folder)
    assert folder.is_dir() and not list(folder.iterdir())


def test_a_folder_that_cannot_be_written_is_named_with_the_host(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the shared mount should be")
    folder = blocker / "job-1"
    with pytest.raises(PermissionError) as caught:
        check_checkpoint_folder(folder)
    message = str(caught.value)
    assert str(folder) in message and socket.gethostname() in message
    assert "ENGINE_REAL_CHECKPOINT_DIR" in message
