"""manage.py restore <folder>: a backup of manage.py backup into an empty database."""

from __future__ import annotations

from collections.abc import Callable

from webapp.backups import restore
from webapp.jobs.management.commands import backup


class Command(backup.Command):
    help = (
        "Restore a backup into the (empty) database of DATABASE_URL and the service's folders, with web, "
        "worker and beat stopped; start them afterwards and the reconciler squares the jobs with the engine."
    )
    action: Callable[..., dict[str, object]] = staticmethod(restore)
    folder_help = "a folder written by manage.py backup"
    client = "pg_restore"
