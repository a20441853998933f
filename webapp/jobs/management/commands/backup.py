"""manage.py backup <folder>: the database (pg_dump), then the datasets and checkpoints folders."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.backups import BackupError, backup


class Command(BaseCommand):
    help = "Back up the database and the folders the service writes into a new folder (while it runs)."
    action: Callable[..., dict[str, object]] = staticmethod(backup)
    folder_help = "a new or empty folder"
    client = "pg_dump"

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("folder", type=Path, help=self.folder_help)
        parser.add_argument("--pg-bin", help=f"folder of {self.client} of the server's major version (default: PATH)")

    def handle(self, *args: Any, folder: Path, pg_bin: str | None, **options: Any) -> None:
        try:
            manifest = self.action(folder, pg_bin=pg_bin)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(manifest))
