"""A user's dataset, JSONL or Parquet, checked as the engine will read it (``envs.user_dataset``),
every problem named by its line or row, before anything is stored or trained: torch-free, so the
service can check uploads at once."""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw_engine.errors import FieldError, SpecError


@dataclass(frozen=True, slots=True)
class DatasetRow:
    line: int
    """1-based line number in a JSONL file; 1-based row number in a Parquet file."""
    prompt: str
    """The last user message's content."""
    answer: str


@dataclass(frozen=True, slots=True)
class DatasetCheck:
    """What :func:`check_dataset_text` found: the good rows' count, the first problems, all problems' count."""

    row_count: int
    problems: list[FieldError]
    """At most ``max_problems``, each ``rows[<n>]``: ``line <n>: ...`` (a Parquet file: ``row <n> (index
    <n - 1>): ...``; ``rows`` for the whole file)."""
    problem_count: int
    preview: list[DatasetRow]
    """The first good rows (up to ``preview_rows``)."""
    format: str = "jsonl"
    """``jsonl`` or ``parquet``: how the file was read."""


def check_dataset_text(
    text: str | bytes,
    filename: str = "dataset.jsonl",
    *,
    grader: str | None = None,
    max_problems: int = 50,
    preview_rows: int = 5,
) -> DatasetCheck:
    """Check every row of a user's dataset as the engine will read it (``envs.user_dataset``).

    The format is ``filename``'s suffix (``.jsonl``, ``.parquet``), else Parquet's magic bytes.
    JSONL: blank lines are skipped; each other line must be a JSON object with a prompt (or
    messages) and an answer (and a unique ``id`` if any). Parquet: verl's columns. With
    ``grader``, each answer must also be one that grader can match. Never raises for bad
    content; an unknown grader is a SpecError.
    """
    from jigsaw_engine.envs.graders import GraderName, parse_grader_name
    from jigsaw_engine.envs.user_dataset import format_of, scan_dataset, where

    grader_name: GraderName | None = None
    if grader is not None:
        try:
            grader_name = parse_grader_name(grader)
        except ValueError as exc:
            raise SpecError([FieldError("grader", str(exc))]) from exc
    data = text.encode("utf-8") if isinstance(text, str) else text
    fmt = format_of(filename, data)
    found = scan_dataset(data, fmt, grader=grader_name)
    problems = [
        FieldError("rows", f"{filename}: {p.message}")
        if p.number is None
        else FieldError(f"rows[{p.number}]", f"{where(fmt, p.number)}: {p.message}")
        for p in found.problems[:max_problems]
    ]
    return DatasetCheck(
        row_count=len(found.rows),
        problems=problems,
        problem_count=len(found.problems),
        preview=[DatasetRow(line=r.number, prompt=r.prompt, answer=r.answer) for r in found.rows[:preview_rows]],
        format=fmt,
    )
