"""A user's own dataset, graded by a grader they choose: JSONL rows (``{"prompt", "answer"}``,
or a ``messages`` conversation) or a Parquet file in verl's layout, picked by the file's suffix.

Loading checks every row up front and reports all bad ones in one :class:`DatasetError`, each
named ``file:line`` (``file: row N (index N-1)`` in a Parquet file), so a bad upload fails at
submission rather than mid-run.
"""

from __future__ import annotations

from pathlib import Path

from jigsaw_engine.envs.dataset_error import DatasetError
from jigsaw_engine.envs.graders import GraderName, parse_grader_name
from jigsaw_engine.envs.jsonl_rows import MAX_REPORTED_LINES
from jigsaw_engine.envs.protocol import EnvTask
from jigsaw_engine.envs.single_turn import SingleTurnEnv
from jigsaw_engine.envs.user_dataset import DatasetFormat, RowProblem, format_of, scan_dataset, where


def load_dataset_tasks(path: Path | str, grader: GraderName) -> list[EnvTask]:
    """Every row of ``path`` (``.parquet``: verl's layout; anything else: JSONL) as a task.

    A JSONL row's ``id`` (optional, unique) becomes the task id, else ``<stem>:<line>``; a Parquet
    row's id is ``<stem>:<row>``. Raises :class:`DatasetError` naming each bad row, including
    answers ``grader`` could never match.
    """
    name = str(path)
    fmt = format_of(name)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DatasetError(name, [f"{name}: cannot read file ({exc.strerror or exc})"]) from exc
    found = scan_dataset(data, fmt, grader=grader)
    if found.problems:
        listed = found.problems[:MAX_REPORTED_LINES]
        raise DatasetError(
            name,
            [_named(name, fmt, p) for p in listed],
            hint=found.hint,
            omitted=len(found.problems) - len(listed),
        )
    stem = Path(path).stem
    unit = "" if fmt == "jsonl" else "row "
    return [
        EnvTask(
            task_id=row.task_id or f"{stem}:{row.number}",
            prompt=row.prompt,
            answer=row.answer,
            source=f"{name}:{unit}{row.number}",
            messages=row.messages,
            data_source=row.data_source,
        )
        for row in found.rows
    ]


def _named(path: str, fmt: DatasetFormat, problem: RowProblem) -> str:
    """``path:3: why`` (JSONL), ``path: row 4 (index 3): why`` (Parquet), ``path: why`` (the file)."""
    if problem.number is None:
        return f"{path}: {problem.message}"
    if fmt == "jsonl":
        return f"{path}:{problem.number}: {problem.message}"
    return f"{path}: {where(fmt, problem.number)}: {problem.message}"


class JsonlEnv(SingleTurnEnv):
    """One reply per row of a user's dataset file (JSONL or Parquet, by suffix), graded by ``grader``."""

    def __init__(self, path: Path | str, grader: str, *, name: str = "jsonl") -> None:
        grader_name = parse_grader_name(grader)
        self.path = Path(path)
        super().__init__(load_dataset_tasks(path, grader_name), grader=grader_name, name=name)
