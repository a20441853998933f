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


MODEL_FOLDER = "model"
"""Each step's policy as a Hugging Face directory (``RLJob.save_checkpoint``'s ``MODEL_FOLDER``)."""


class CheckpointStepMissing(LookupError):
    """No checkpoint of that step on disk; ``steps`` are those there are."""

    def __init__(self, step: int, steps: list[int]) -> None:
        super().__init__(f"no checkpoint of step {step}; checkpoints: {steps or 'none'}")
        self.step, self.steps = step, steps


class CheckpointNotExported(LookupError):
    """The step's checkpoint holds no Hugging Face directory (written before checkpoints had one)."""


def checkpoint_steps(root: Path, job_id: str) -> list[int]:
    """The steps the job's folder holds a finished checkpoint of, in order."""
    folder = job_checkpoint_folder(root, job_id)
    if not folder.is_dir():
        return []
    steps = [p.name.removeprefix("step-") for p in folder.glob("step-*") if p.is_dir()]
    return sorted(int(s) for s in steps if s.isdecimal())


def checkpoint_model_files(root: Path, job_id: str, step: int) -> list[tuple[str, Path]]:
    """The files of step ``step``'s policy as ``(name in its directory, path)``, sorted by name;
    CheckpointStepMissing or CheckpointNotExported when there is none to take out."""
    folder = job_checkpoint_folder(root, job_id) / f"step-{step:06d}"
    if not folder.is_dir():
        raise CheckpointStepMissing(step, checkpoint_steps(root, job_id))
    model = folder / MODEL_FOLDER
    if not (model / "config.json").is_file():
        raise CheckpointNotExported(f"checkpoint of step {step} holds no model directory ({model})")
    files = [p for p in model.rglob("*") if p.is_file() and not p.is_symlink()]
    return sorted((p.relative_to(model).as_posix(), p) for p in files)
