"""A checkpoint's model from the server's tar stream into a directory, a chunk at a time.

The archive holds one folder (``<job name>-step-<step>/``); its files are written straight
into the directory asked for, so ``out`` is the Hugging Face directory itself. They land in a
hidden folder beside it first and take its name only once the archive has ended, so an
interrupted download never leaves a directory that looks complete.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from jigsaw_client.errors import ClientError

Progress = Callable[[int, int | None], None]
"""Called with (bytes received, bytes in all or None when the server did not say)."""


@dataclass(frozen=True, slots=True)
class DownloadedModel:
    path: Path
    step: int
    files: list[str]
    bytes: int


class DownloadError(ClientError):
    """The archive could not be written where asked, or it is not the archive it should be."""


class _ChunkReader(io.RawIOBase):
    """A file object over an iterator of byte chunks, counting what it has read."""

    def __init__(self, chunks: Iterator[bytes], progress: Callable[[int], None]) -> None:
        self._chunks, self._progress = chunks, progress
        self._pending = b""
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
            self.received += len(chunk)
            self._progress(self.received)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def check_destination(out: Path) -> None:
    """A DownloadError unless ``out`` can become the model's directory (absent, or empty)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DownloadError(f"{out} exists and is not an empty directory; pass --out with a new directory")


def extract_model(
    chunks: Iterator[bytes], out: Path, *, step: int, total: int | None, progress: Progress | None = None
) -> DownloadedModel:
    """Write the archive read from ``chunks`` into ``out`` (see the module's note)."""
    check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    reader = _ChunkReader(chunks, lambda received: progress(received, total) if progress else None)
    files: list[str] = []
    try:
        with tarfile.open(fileobj=io.BufferedReader(reader, 1 << 20), mode="r|") as tar:
            for member in tar:
                inner = PurePosixPath(member.name).parts[1:]  # below the archive's one folder
                if not inner:
                    continue
                member.name = str(PurePosixPath(*inner))
                tar.extract(member, staging, filter="data")  # refuses links and paths leaving it
                if member.isfile():
                    files.append(member.name)
        if total is not None and reader.received != total:
            raise DownloadError(f"the archive ended after {reader.received} of {total} bytes; download it again")
        if not files:
            raise DownloadError("the archive held no files")
        if out.exists():
            out.rmdir()  # empty, as checked
        staging.rename(out)
    except (tarfile.TarError, OSError) as exc:
        raise DownloadError(f"could not write the model into {out}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return DownloadedModel(path=out, step=step, files=sorted(files), bytes=reader.received)
