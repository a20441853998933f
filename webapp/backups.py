"""A backup of everything the service keeps, and its restore (docs/operations.md#backups-and-restore).

A backup folder holds ``database.dump`` (``pg_dump -Fc``), then ``datasets.tar`` and, in real
mode, ``checkpoints.tar``: the files are copied after the dump, so that every row of the dump
finds its file (both folders are only ever added to while a row points at their files).
Redis holds nothing to back up. The restore goes into an empty database, with web, worker and
beat stopped; the reconciler squares the restored jobs with the engine once they start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

DUMP = "database.dump"
MANIFEST = "manifest.json"


class BackupError(Exception):
    """What went wrong and what to do about it, for the operator."""


def _folders() -> dict[str, str]:
    """Archive name -> the folder it holds, for the folders this deployment writes."""
    folders = {"datasets": settings.DATASETS_DIR}
    if settings.ENGINE_REAL_CHECKPOINT_DIR:
        folders["checkpoints"] = settings.ENGINE_REAL_CHECKPOINT_DIR
    return folders


def _client(name: str, pg_bin: str | None) -> str:
    path = str(Path(pg_bin) / name) if pg_bin else shutil.which(name)
    if not path or not Path(path).is_file():
        raise BackupError(
            f"{name} not found{f' in {pg_bin}' if pg_bin else ' on PATH'}: install PostgreSQL's client of the "
            "server's major version (Debian: postgresql-client-<version>) or pass --pg-bin"
        )
    return path


def _database_args() -> tuple[list[str], dict[str, str]]:
    """Connection options for pg_dump/pg_restore, and their environment (the password stays out
    of the process list)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise BackupError(
            "standalone mode keeps everything in STANDALONE_DB: copy that file (and DATASETS_DIR) "
            "with the server stopped"
        )
    args = ["--dbname", db["NAME"]]
    for option, key in (("--host", "HOST"), ("--port", "PORT"), ("--username", "USER")):
        if db.get(key):
            args += [option, str(db[key])]
    env = dict(os.environ)
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return args, env


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise BackupError(f"{Path(command[0]).name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def backup(folder: Path, *, pg_bin: str | None = None) -> dict[str, object]:
    """Write a backup into ``folder`` (new or empty); returns its manifest."""
    if folder.exists() and any(folder.iterdir()):
        raise BackupError(f"{folder} is not empty: give a new folder for each backup")
    args, env = _database_args()
    pg_dump = _client("pg_dump", pg_bin)
    folder.mkdir(parents=True, exist_ok=True)
    taken_at = datetime.now(UTC).isoformat()
    _run([pg_dump, "--format=custom", "--file", str(folder / DUMP), *args], env)
    archived = []
    for name, source in _folders().items():
        if Path(source).is_dir():
            with tarfile.open(folder / f"{name}.tar", "w") as tar:
                tar.add(source, arcname=".")
            archived.append(name)
    manifest: dict[str, object] = {"taken_at": taken_at, "database": DUMP, "folders": archived}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def restore(folder: Path, *, pg_bin: str | None = None) -> dict[str, object]:
    """Restore ``folder``'s backup into this deployment's database, which must be empty, and
    its files into the deployment's folders; returns the backup's manifest."""
    if not (folder / MANIFEST).is_file():
        raise BackupError(f"{folder} holds no {MANIFEST}: not a backup written by manage.py backup")
    manifest = json.loads((folder / MANIFEST).read_text())
    args, env = _database_args()
    pg_restore = _client("pg_restore", pg_bin)
    folders = _folders()
    for name in manifest["folders"]:
        if name not in folders:
            raise BackupError(
                f"the backup holds {name}.tar but ENGINE_REAL_CHECKPOINT_DIR is empty: set it to the folder "
                "the Ray nodes share, then restore"
            )
    if connection.introspection.table_names():
        raise BackupError(
            f"database {settings.DATABASES['default']['NAME']} is not empty: restore into a new database "
            "(createdb) and point DATABASE_URL at it, with web, worker and beat stopped"
        )
    connection.close()
    _run([pg_restore, "--no-owner", "--exit-on-error", *args, str(folder / DUMP)], env)
    for name in manifest["folders"]:
        Path(folders[name]).mkdir(parents=True, exist_ok=True)
        with tarfile.open(folder / f"{name}.tar") as tar:
            tar.extractall(folders[name], filter="data")
    return dict(manifest)
