"""A checkpoint's model as a tar stream: a Hugging Face directory, sent a chunk at a time.

The archive is plain (uncompressed) tar, written here member by member: each file's header,
then its bytes read ``CHUNK`` at a time, so a server holds one chunk of a model of any size,
never the model. Every size is known before the first byte, so the response carries its
``Content-Length`` and a client can show progress. Under ASGI the chunks come from an async
iterator whose reads run in a worker thread: Django reads a sync iterator whole before it
sends anything there.
"""

from __future__ import annotations

import asyncio
import re
import tarfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from webapp import engine_gateway
from webapp.jobs.errors import CheckpointNotFound, NoWeights
from webapp.jobs.models import EngineMode, Job

CHUNK = 1 << 20
BLOCK = tarfile.BLOCKSIZE
END_OF_ARCHIVE = b"\0" * (2 * BLOCK)


@dataclass(frozen=True, slots=True)
class ArchiveMember:
    name: str
    path: Path
    size: int
    mtime: int

    def header(self) -> bytes:
        info = tarfile.TarInfo(self.name)
        info.size, info.mtime, info.mode = self.size, self.mtime, 0o644
        return info.tobuf(format=tarfile.PAX_FORMAT)

    def padding(self) -> bytes:
        return b"\0" * (-self.size % BLOCK)


@dataclass(frozen=True, slots=True)
class ModelArchive:
    """The tar of one checkpoint's model: every member under ``folder/``."""

    folder: str
    members: list[ArchiveMember]

    @property
    def filename(self) -> str:
        return f"{self.folder}.tar"

    @property
    def size(self) -> int:
        return sum(len(m.header()) + m.size + len(m.padding()) for m in self.members) + len(END_OF_ARCHIVE)

    def chunks(self) -> Iterator[bytes]:
        for member in self.members:
            yield member.header()
            with member.path.open("rb") as source:
                left = member.size
                while left:
                    chunk = source.read(min(CHUNK, left))
                    if not chunk:  # the size in the header is a promise: never send a short member
                        raise OSError(f"{member.path} shrank while it was being sent")
                    left -= len(chunk)
                    yield chunk
            yield member.padding()
        yield END_OF_ARCHIVE

    async def async_chunks(self) -> AsyncIterator[bytes]:
        chunks = self.chunks()
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                yield chunk
        finally:
            chunks.close()  # a client that went away leaves no file open


def model_archive(*, job: Job, step: int) -> ModelArchive:
    """The archive of ``job``'s model after ``step`` steps, or the error a tenant can act on."""
    if job.engine_mode != EngineMode.REAL:
        raise NoWeights(
            f"job {job.name} ran on the simulated engine, which trains no weights: it has no model to download",
            [
                {
                    "field": "engine_mode",
                    "message": "is simulated; submit the job to a service in real mode "
                    "(ENGINE_MODE=real) to train a model you can download",
                }
            ],
        )
    try:
        files = engine_gateway.checkpoint_model_files(job_id=str(job.pk), step=step)
    except engine_gateway.CheckpointStepMissing as missing:
        raise CheckpointNotFound(
            f"job {job.name} has no checkpoint at step {step}",
            [{"field": "step", "message": f"must be one of {missing.steps or 'none yet'}"}],
        ) from None
    except engine_gateway.CheckpointNotExported:
        raise NoWeights(
            f"the checkpoint of job {job.name} at step {step} holds the training state only, no model "
            "directory (it was written before checkpoints exported one)",
            [{"field": "step", "message": "has no model; clone the job from it and download the clone's checkpoint"}],
        ) from None
    if files is None:
        raise NoWeights(
            "this service keeps no checkpoint files (ENGINE_REAL_CHECKPOINT_DIR is empty)",
            [
                {
                    "field": "step",
                    "message": f"step {step} has no files; ask the operator to set ENGINE_REAL_CHECKPOINT_DIR",
                }
            ],
        )
    folder = f"{_slug(job.name)}-step-{step}"
    members = []
    for name, path in files:
        stat = path.stat()
        members.append(ArchiveMember(f"{folder}/{name}", path, stat.st_size, int(stat.st_mtime)))
    return ModelArchive(folder=folder, members=members)


def _slug(name: str) -> str:
    """A job name as a file name: letters, digits, dots, dashes and underscores."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "model"
