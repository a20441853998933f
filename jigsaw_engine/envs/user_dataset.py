"""A user's own dataset, JSONL or verl's Parquet layout, read into rows with every problem named.

JSONL: one JSON object per line, with the question as ``prompt`` (a string, or a list of chat
messages) or ``messages`` (a list of ``{"role", "content"}``), the reference as ``answer`` (a
string) or verl's ``reward_model: {"ground_truth": ...}``, and optionally ``id`` (unique) and
``data_source``. Problems are named by line: ``line 3``.

Parquet, as verl's data recipes write it: columns ``prompt`` (a list of ``{"role", "content"}``
messages), ``reward_model`` (a struct with ``ground_truth``; ``style`` is ignored),
``data_source`` (a string) and, optionally, ``extra_info``. Problems are named by row, counted
from 1, with its 0-based index beside it (``row 4 (index 3)``) for those who look it up in pandas.

Torch-free, pyarrow imported only for Parquet: the service checks uploads with it, and the
engine loads training files with it (:mod:`jigsaw_engine.envs.jsonl_dataset`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from jigsaw_engine.envs.graders import GraderName, check_references
from jigsaw_engine.envs.jsonl_rows import json_object, json_type, text_field_problem

DatasetFormat = Literal["jsonl", "parquet"]
PARQUET_MAGIC = b"PAR1"
ROLES = ("system", "user", "assistant")

JSONL_HINT = 'each line needs {"prompt": ..., "answer": ...} (or "messages": [{"role": ..., "content": ...}, ...])'
PARQUET_HINT = (
    'verl\'s layout: each row needs "prompt", a list of {"role", "content"} messages, '
    'and "reward_model" with "ground_truth"'
)
PARQUET_COLUMNS = ("prompt", "reward_model", "data_source")
"""The columns read; others (verl's ``extra_info``, ``ability``) are left alone."""


@dataclass(frozen=True, slots=True)
class UserRow:
    number: int
    """1-based: the line of a JSONL file, the row of a Parquet file."""
    prompt: str
    """The last user message's content."""
    answer: str
    messages: tuple[tuple[str, str], ...] = ()
    """Every message before the model's reply, when the row gives a conversation."""
    data_source: str = ""
    task_id: str | None = None


@dataclass(frozen=True, slots=True)
class RowProblem:
    number: int | None
    """The row's 1-based line or row number; None for the file as a whole."""
    message: str


@dataclass(slots=True)
class ScannedDataset:
    format: DatasetFormat
    rows: list[UserRow] = field(default_factory=list)
    """The good rows, in file order."""
    problems: list[RowProblem] = field(default_factory=list)
    """Every problem, in file order, one per bad row (its reasons joined), file-wide ones first."""

    @property
    def hint(self) -> str:
        return JSONL_HINT if self.format == "jsonl" else PARQUET_HINT


def format_of(name: str, content: bytes = b"") -> DatasetFormat:
    """``.parquet`` or ``.jsonl`` by suffix; a name with neither (a dataset's name) by Parquet's magic bytes."""
    lower = name.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith(".jsonl"):
        return "jsonl"
    return "parquet" if content.startswith(PARQUET_MAGIC) else "jsonl"


def where(fmt: DatasetFormat, number: int) -> str:
    """How a problem names its row: ``line 3``, or ``row 4 (index 3)`` in a Parquet file."""
    return f"line {number}" if fmt == "jsonl" else f"row {number} (index {number - 1})"


def scan_dataset(data: bytes, fmt: DatasetFormat, *, grader: GraderName | None = None) -> ScannedDataset:
    """Every row of ``data`` checked; with ``grader``, each answer must also be one it can match.

    Never raises for bad content: an unreadable file, a missing column or an empty file is a
    problem with ``number`` None.
    """
    found = ScannedDataset(format=fmt)
    objects = _jsonl_objects(data) if fmt == "jsonl" else _parquet_objects(data, found)
    reasons: dict[int, list[str]] = {}
    candidates: list[UserRow] = []
    for number, value in objects:
        if not isinstance(value, dict):  # the line itself is unusable: why
            reasons[number] = [str(value)]
            continue
        row, row_reasons = _row(number, value, fmt)
        if row_reasons:
            reasons[number] = row_reasons
        if row is not None:
            candidates.append(row)
    if grader is not None:
        checks = check_references(grader, [row.answer for row in candidates])
        for row, problem in zip(candidates, checks, strict=True):
            if problem:
                reasons.setdefault(row.number, []).append(problem)
    first_use: dict[str, int] = {}
    for row in candidates:
        if row.number in reasons:
            continue
        if row.task_id is not None:
            if row.task_id in first_use:
                used = first_use[row.task_id]
                reasons[row.number] = [f'id "{row.task_id}" already used on line {used} (ids must be unique)']
                continue
            first_use[row.task_id] = row.number
        found.rows.append(row)
    found.problems.extend(RowProblem(n, ", ".join(reasons[n])) for n in sorted(reasons))
    if not found.rows and not found.problems:
        found.problems.append(RowProblem(None, "no rows (the file is empty)"))
    return found


def _jsonl_objects(data: bytes) -> list[tuple[int, object]]:
    """Each non-blank line's JSON object, or the reason it is not one."""
    objects: list[tuple[int, object]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        value, problem = json_object(raw)
        if value is None:
            objects.append((number, problem or "unusable row"))
            continue
        objects.append((number, value))
    return objects


def _parquet_objects(data: bytes, found: ScannedDataset) -> list[tuple[int, object]]:
    """Each row as a dict of verl's columns, after checking that the file has them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        found.problems.append(RowProblem(None, f"not a Parquet file ({exc})"))
        return []
    names = list(schema.names)
    have = f"the columns are: {', '.join(names) if names else 'none'}"
    missing = [f'no column "{name}" ({have})' for name in ("prompt",) if name not in names]
    if "reward_model" not in names:
        missing.append(f'no column "reward_model.ground_truth" ({have})')
    else:
        reward_model = schema.field("reward_model").type
        if not pa.types.is_struct(reward_model):
            missing.append(f'column "reward_model" must be a struct with "ground_truth", got {reward_model}')
        elif reward_model.get_field_index("ground_truth") < 0:
            fields = ", ".join(reward_model.field(i).name for i in range(reward_model.num_fields)) or "none"
            missing.append(f'no column "reward_model.ground_truth" (reward_model\'s fields are: {fields}; {have})')
    if missing:
        found.problems.extend(RowProblem(None, message) for message in missing)
        return []
    try:
        table = pq.read_table(pa.BufferReader(data), columns=[c for c in PARQUET_COLUMNS if c in names])
    except (pa.ArrowException, OSError) as exc:
        found.problems.append(RowProblem(None, f"cannot read the Parquet file ({exc})"))
        return []
    return list(enumerate(table.to_pylist(), start=1))


def _row(number: int, value: Mapping[str, object], fmt: DatasetFormat) -> tuple[UserRow | None, list[str]]:
    """The row, or None with its reasons; a row with a usable answer but other problems is
    returned too (with reasons), so its answer is still checked against the grader."""
    reasons: list[str] = []
    prompt, messages = _prompt(value, fmt, reasons)
    answer = _answer(value, fmt, reasons)
    task_id = _optional_text(value, "id", reasons) if fmt == "jsonl" else None
    data_source = _optional_text(value, "data_source", reasons) or ""
    if answer is None:
        return None, reasons
    if prompt is None:
        prompt = ""
    row = UserRow(number, prompt, answer, messages, data_source, task_id)
    return row, reasons


Messages = tuple[tuple[str, str], ...]


def _prompt(value: Mapping[str, object], fmt: DatasetFormat, reasons: list[str]) -> tuple[str | None, Messages]:
    if fmt == "jsonl" and "messages" in value:
        if "prompt" in value:
            reasons.append('give "prompt" or "messages", not both')
            return None, ()
        return _conversation("messages", value["messages"], reasons)
    if "prompt" not in value or (fmt == "parquet" and value["prompt"] is None):
        reasons.append('missing field "prompt"')
        return None, ()
    prompt = value["prompt"]
    if fmt == "jsonl" and not isinstance(prompt, list):
        text = _text("prompt", prompt, reasons)
        return text, ()
    return _conversation("prompt", prompt, reasons)


def _conversation(name: str, value: object, reasons: list[str]) -> tuple[str | None, Messages]:
    """A list of ``{"role", "content"}`` messages ending with the user's: (its last user message, the pairs)."""
    shape = 'a list of {"role", "content"} messages'
    if not isinstance(value, list):
        reasons.append(f'field "{name}" must be {shape}, got {json_type(value)}')
        return None, ()
    if not value:
        reasons.append(f'field "{name}" is an empty list; it needs {shape}')
        return None, ()
    pairs: list[tuple[str, str]] = []
    bad = False
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            reasons.append(f'{name}[{i}] must be a {{"role", "content"}} object, got {json_type(message)}')
            bad = True
            continue
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            got = f'"{role}"' if isinstance(role, str) else json_type(role) if "role" in message else "nothing"
            reasons.append(f"{name}[{i}].role must be one of {', '.join(ROLES)}, got {got}")
            bad = True
        if not isinstance(content, str) or not content.strip():
            got = (
                "an empty string"
                if isinstance(content, str)
                else json_type(content)
                if "content" in message
                else "nothing"
            )
            reasons.append(f"{name}[{i}].content must be a non-empty string, got {got}")
            bad = True
        if isinstance(role, str) and isinstance(content, str):
            pairs.append((role, content))
    if bad:
        return None, ()
    if pairs[-1][0] != "user":
        reasons.append(f'the last message of "{name}" must be the user\'s (the model answers it), got "{pairs[-1][0]}"')
        return None, ()
    return pairs[-1][1], tuple(pairs)


def _answer(value: Mapping[str, object], fmt: DatasetFormat, reasons: list[str]) -> str | None:
    if fmt == "jsonl" and "answer" in value:
        if "reward_model" in value:
            reasons.append('give "answer" or "reward_model", not both')
            return None
        answer = _text("answer", value["answer"], reasons)
        return answer.strip() if answer is not None else None
    if "reward_model" not in value or (fmt == "parquet" and value["reward_model"] is None):
        reasons.append('missing field "answer"' if fmt == "jsonl" else 'missing "reward_model.ground_truth"')
        return None
    reward_model = value["reward_model"]
    if not isinstance(reward_model, dict):
        reasons.append(f'field "reward_model" must be an object with "ground_truth", got {json_type(reward_model)}')
        return None
    truth = reward_model.get("ground_truth")
    if isinstance(truth, int | float) and not isinstance(truth, bool):
        truth = str(truth)
    if not isinstance(truth, str):
        got = json_type(truth) if "ground_truth" in reward_model else "nothing"
        reasons.append(f'"reward_model.ground_truth" must be a string or a number, got {got}')
        return None
    if not truth.strip():
        reasons.append('"reward_model.ground_truth" is empty')
        return None
    return truth.strip()


def _optional_text(value: Mapping[str, object], name: str, reasons: list[str]) -> str | None:
    if value.get(name) is None:
        return None
    return _text(name, value[name], reasons)


def _text(name: str, value: object, reasons: list[str]) -> str | None:
    problem = text_field_problem(name, value)
    if problem:
        reasons.append(problem)
        return None
    return value if isinstance(value, str) else None
