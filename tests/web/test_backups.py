"""manage.py backup and restore refuse what would lose or mix data, saying what to do instead.
The round trip itself, while jobs run, is tests/faults/test_backup_restore.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_a_backup_goes_into_a_new_folder_only(tmp_path: Path) -> None:
    (tmp_path / "earlier.dump").write_text("x")
    with pytest.raises(CommandError, match="is not empty: give a new folder"):
        call_command("backup", str(tmp_path))


def test_a_missing_client_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"pg_dump not found in .*postgresql-client-<version>"):
        call_command("backup", str(tmp_path / "new"), "--pg-bin", str(tmp_path))


def test_a_restore_never_goes_into_a_database_in_use(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"folders": []}))
    with pytest.raises(CommandError, match="is not empty: restore into a new database"):
        call_command("restore", str(tmp_path))


def test_a_restore_needs_a_backup_folder(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"not a backup written by manage\.py backup"):
        call_command("restore", str(tmp_path))


def test_checkpoints_need_their_folder_before_anything_is_restored(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"folders": ["datasets", "checkpoints"]}))
    with (
        override_settings(ENGINE_REAL_CHECKPOINT_DIR=""),
        pytest.raises(CommandError, match=r"holds checkpoints\.tar but ENGINE_REAL_CHECKPOINT_DIR is empty"),
    ):
        call_command("restore", str(tmp_path))
