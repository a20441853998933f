"""Reading JSONL rows, ours or a user's, with every bad line reported at once.

A user uploading a dataset should see all of its problems in one error (up to a limit), each
named ``path:line``, rather than fix them one run at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jigsaw_engine.envs.dataset_error import DatasetError

MAX_REPORTED_LINES = 20
"""Bad lines named in one :class:`DatasetError`; the rest are only counted."""

RowCheck = Callable[[Mapping[str, str]], str | None]
"""A further test of a well-formed row: a problem to report, or None."""


@dataclass(frozen=True, slots=True)
class JsonlRow:
    """One well-formed line: its 1-based line number and its string fields."""

    line: int
    fields: Mapping[str, str]


def read_jsonl_rows(
    path: Path | str,
    required: Sequence[str],
    *,
    hint: str,
    optional: Sequence[str] = (),
    check: RowCheck | None = None,
) -> list[JsonlRow]:
    """Read every non-blank line of ``path`` as a JSON object with non-empty string fields.

    Raises :class:`DatasetError` naming each bad line (bad JSON, not an object, a field missing,
    empty or not a string, a failed ``check``), an unreadable file, or a file with no rows.
    ``hint`` says what a good line looks like and ends the error's message.
    """
    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DatasetError(where, [f"{where}: cannot read file ({exc.strerror or exc})"], hint=hint) from exc
    rows: list[JsonlRow] = []
    problems: list[str] = []
    omitted = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        fields, line_problems = parse_line(raw, required, optional, check)
        if line_problems:
            if len(problems) < MAX_REPORTED_LINES:
                problems.append(f"{where}:{number}: {', '.join(line_problems)}")
            else:
                omitted += 1
        elif fields is not None:
            rows.append(JsonlRow(line=number, fields=fields))
    if problems:
        raise DatasetError(where, problems, hint=hint, omitted=omitted)
    if not rows:
        raise DatasetError(where, [f"{where}: no rows (the file is empty)"], hint=hint)
    return rows


def parse_line(
    raw: bytes, required: Sequence[str], optional: Sequence[str], check: RowCheck | None
) -> tuple[dict[str, str] | None, list[str]]:
    value, problem = json_object(raw)
    if value is None:
        return None, [problem or "unusable row"]
    fields: dict[str, str] = {}
    problems: list[str] = []
    for name in (*required, *optional):
        if name not in value:
            if name in required:
                problems.append(f'missing field "{name}"')
            continue
        field = value[name]
        problem = text_field_problem(name, field)
        if problem:
            problems.append(problem)
        elif isinstance(field, str):
            fields[name] = field
    if check is not None and all(name in fields for name in required):
        problem = check(fields)
        if problem:
            problems.append(problem)
    return (None if problems else fields), problems


def json_object(raw: bytes) -> tuple[dict[str, object] | None, str | None]:
    """One line as a JSON object, or None and why it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not valid UTF-8"
    try:
        value: object = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {json_type(value)}"
    return value, None


def text_field_problem(name: str, value: object) -> str | None:
    """Why ``value`` is not a non-empty string for field ``name``, or None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'field "{name}" must be a string, got the number {value} (write "{value}")'
    if not isinstance(value, str):
        return f'field "{name}" must be a string, got {json_type(value)}'
    if not value.strip():
        return f'field "{name}" is empty'
    return None


def json_type(value: object) -> str:
    """How a problem names a JSON value's type: ``a list``, ``null``, ``the number``'s ``a number``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "a string"
