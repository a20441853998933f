"""A user's JSONL dataset checked as the engine will read it (``envs.jsonl_dataset``), every
problem named by its line, before anything is stored or trained: torch-free, so the service
can check uploads at once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jigsaw_engine.errors import FieldError, SpecError

DATASET_FIELDS = ("prompt", "answer")
DATASET_OPTIONAL_FIELDS = ("id",)


@dataclass(frozen=True, slots=True)
class DatasetRow:
    line: int
    """1-based line number in the file."""
    prompt: str
    answer: str


@dataclass(frozen=True, slots=True)
class DatasetCheck:
    """What :func:`check_dataset_text` found: the good rows' count, the first problems, all problems' count."""

    row_count: int
    problems: list[FieldError]
    """At most ``max_problems``, each ``rows[<line>]``: ``line <n>: ...`` (``rows`` for the whole file)."""
    problem_count: int
    preview: list[DatasetRow]
    """The first good rows (up to ``preview_rows``)."""


def check_dataset_text(
    text: str | bytes,
    filename: str = "dataset.jsonl",
    *,
    grader: str | None = None,
    max_problems: int = 50,
    preview_rows: int = 5,
) -> DatasetCheck:
    """Check every line of a user's JSONL dataset as the engine will read it (``envs.jsonl_dataset``).

    Blank lines are skipped; each other line must be a JSON object with non-empty string
    ``prompt`` and ``answer`` (and a unique ``id`` if any). With ``grader``, each answer must
    also be one that grader can match. Never raises for bad content; an unknown grader is a SpecError.
    """
    from jigsaw_engine.envs.graders import check_reference, parse_grader_name
    from jigsaw_engine.envs.jsonl_rows import parse_line

    check: Callable[[Mapping[str, str]], str | None] | None = None
    if grader is not None:
        try:
            grader_name = parse_grader_name(grader)
        except ValueError as exc:
            raise SpecError([FieldError("grader", str(exc))]) from exc

        def check_answer(fields: Mapping[str, str]) -> str | None:
            return check_reference(grader_name, fields["answer"].strip())

        check = check_answer

    data = text.encode("utf-8") if isinstance(text, str) else text
    problems: list[FieldError] = []
    problem_count = 0
    row_count = 0
    preview: list[DatasetRow] = []
    first_line: dict[str, int] = {}

    def report(line: int, message: str) -> None:
        nonlocal problem_count
        problem_count += 1
        if len(problems) < max_problems:
            problems.append(FieldError(f"rows[{line}]", f"line {line}: {message}"))

    for number, raw in enumerate(data.split(b"\n"), start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        fields, line_problems = parse_line(raw, DATASET_FIELDS, DATASET_OPTIONAL_FIELDS, check)
        if line_problems or fields is None:
            report(number, ", ".join(line_problems) or "unusable row")
            continue
        task_id = fields.get("id")
        if task_id is not None:
            if task_id in first_line:
                report(number, f'id "{task_id}" already used on line {first_line[task_id]} (ids must be unique)')
                continue
            first_line[task_id] = number
        row_count += 1
        if len(preview) < preview_rows:
            preview.append(DatasetRow(line=number, prompt=fields["prompt"], answer=fields["answer"].strip()))
    if row_count == 0 and problem_count == 0:
        problem_count = 1
        problems.append(FieldError("rows", f"{filename}: no rows (the file is empty)"))
    return DatasetCheck(row_count=row_count, problems=problems, problem_count=problem_count, preview=preview)
