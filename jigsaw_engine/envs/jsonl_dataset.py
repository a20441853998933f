"""A user's own dataset: JSONL rows ``{"prompt", "answer"}`` graded by a grader they choose.

Loading checks every line up front and reports all bad ones in one :class:`DatasetError`,
each named ``file:line``, so a bad upload fails at submission rather than mid-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jigsaw_engine.envs.dataset_error import DatasetError
from jigsaw_engine.envs.graders import GraderName, check_reference, parse_grader_name
from jigsaw_engine.envs.jsonl_rows import MAX_REPORTED_LINES, read_jsonl_rows
from jigsaw_engine.envs.protocol import EnvTask
from jigsaw_engine.envs.single_turn import SingleTurnEnv

JSONL_HINT = 'each line needs {"prompt": ..., "answer": ...}'


def load_jsonl_tasks(path: Path | str, grader: GraderName) -> list[EnvTask]:
    """Every row of ``path`` as a task; ``id`` (optional, unique) becomes the task id, else ``<stem>:<line>``.

    Raises :class:`DatasetError` naming each bad line, including answers ``grader`` could never match.
    """

    def check(fields: Mapping[str, str]) -> str | None:
        return check_reference(grader, fields["answer"].strip())

    rows = read_jsonl_rows(path, ("prompt", "answer"), optional=("id",), hint=JSONL_HINT, check=check)
    stem = Path(path).stem
    first_line: dict[str, int] = {}
    duplicates: list[str] = []
    tasks: list[EnvTask] = []
    for row in rows:
        task_id = row.fields.get("id", f"{stem}:{row.line}")
        if task_id in first_line:
            duplicates.append(f'{path}:{row.line}: id "{task_id}" already used on line {first_line[task_id]}')
            continue
        first_line[task_id] = row.line
        tasks.append(
            EnvTask(
                task_id=task_id,
                prompt=row.fields["prompt"],
                answer=row.fields["answer"].strip(),
                source=f"{path}:{row.line}",
            )
        )
    if duplicates:
        raise DatasetError(
            str(path),
            duplicates[:MAX_REPORTED_LINES],
            hint="ids must be unique",
            omitted=max(0, len(duplicates) - MAX_REPORTED_LINES),
        )
    return tasks


class JsonlEnv(SingleTurnEnv):
    """One reply per row of a user's JSONL file, graded by ``grader``."""

    def __init__(self, path: Path | str, grader: str, *, name: str = "jsonl") -> None:
        grader_name = parse_grader_name(grader)
        self.path = Path(path)
        super().__init__(load_jsonl_tasks(path, grader_name), grader=grader_name, name=name)
