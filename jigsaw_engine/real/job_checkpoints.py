"""Where a real job's checkpoints live, and their removal when the job is deleted.

Each real job writes its checkpoints to ``<checkpoint root>/<job id>/`` (``step-NNNNNN/``
folders and a ``latest`` pointer, see ``RLJob.save_checkpoint``); the service executors name
the folder the same way. Only an ended job's folder is removed: nothing writes to it any more.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RemovedCheckpoints:
    files: int
    bytes: int


def job_checkpoint_folder(root: Path, job_id: str) -> Path:
    """``root / job_id``; a ValueError for an id that is not a UUID, so that no id can name a
    folder outside the root (``..``, an absolute path)."""
    return root / str(uuid.UUID(job_id))


def remove_job_checkpoints(root: Path, job_id: str) -> RemovedCheckpoints:
    """Remove the job's checkpoint folder with everything in it; what it held. Removing a
    folder that is not there removes nothing: a retried deletion finishes what one started."""
    folder = job_checkpoint_folder(root, job_id)
    if not folder.exists():
        return RemovedCheckpoints(files=0, bytes=0)
    files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    size = sum(p.stat().st_size for p in files)
    shutil.rmtree(folder)
    return RemovedCheckpoints(files=len(files), bytes=size)
