"""What every ``jigsaw`` command does with its arguments: check them before any work, and say
what is wrong with one as a :class:`UsageError` (``error: <message>``, exit status 2)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jigsaw_engine.errors import SpecError
from jigsaw_engine.spec.workload_file import FILE_FIELD, WorkloadFile, load_workload_file


class UsageError(Exception):
    """Bad input the user can fix: printed as ``error: <message>``, exit status 2."""


def spec_error_text(source: str, exc: SpecError) -> str:
    """Every problem of ``source`` (a file): the file's own in a line, the fields' under a
    count, one ``path: message`` a line."""
    lines = [f"{source}: {e.message}" for e in exc.errors if e.field == FILE_FIELD]
    fields = [e for e in exc.errors if e.field != FILE_FIELD]
    if fields:
        lines.append(f"{source}: {len(fields)} problem{'s' if len(fields) != 1 else ''}")
        lines += [f"  {e}" for e in fields]
    return "\n".join(lines)


def load_workload_arg(path: Path) -> WorkloadFile:
    """``--workload``'s file, parsed; every problem with it is a :class:`UsageError`."""
    try:
        return load_workload_file(path)
    except SpecError as exc:
        raise UsageError(spec_error_text(f"--workload {path}", exc)) from None


def check_output_path(flag: str, path: Path) -> None:
    """Refuse a file to write into a folder that is not there before any work is done."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: no folder {path.parent}; create it or write elsewhere")


def at_least(flag: str, value: int | None, minimum: int) -> None:
    if value is not None and value < minimum:
        raise UsageError(f"{flag}: must be >= {minimum}, got {value}")


def known_names(flag: str, raw: str, available: Sequence[str]) -> tuple[str, ...]:
    """A comma separated list of names, each one of ``available``."""
    names = tuple(n for n in raw.split(",") if n)
    unknown = [n for n in names if n not in available]
    if unknown or not names:
        raise UsageError(f"{flag}: unknown {', '.join(unknown) or '(none)'}; available: {', '.join(available)}")
    return names
