"""Single-turn verifiable math: generated arithmetic for tiny models, GSM8K-format files for real ones.

The generated prompts are deliberately short and uniform (``Compute 3+4.``) so a character-level
model of about a million parameters can learn them; the expected reply is GSM8K's ``#### 7``,
the same format real models are graded on.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, get_args

from jigsaw_engine.envs.graders import ANSWER_MARK, GraderName, check_reference, extract_answer
from jigsaw_engine.envs.jsonl_rows import read_jsonl_rows
from jigsaw_engine.envs.protocol import EnvTask
from jigsaw_engine.envs.single_turn import SingleTurnEnv

ArithOp = Literal["+", "-", "*"]
ARITH_OPS: tuple[ArithOp, ...] = get_args(ArithOp)

GSM8K_SAMPLE = Path(__file__).parent / "data" / "gsm8k_sample.jsonl"
"""Forty-odd original grade-school word problems in GSM8K's format, shipped with the engine."""

_GSM8K_HINT = 'each line needs {"question": ..., "answer": "...reasoning... #### <final answer>"}'


def generate_arithmetic(seed: int, count: int, max_operand: int = 9, ops: Sequence[str] = ("+",)) -> list[EnvTask]:
    """``count`` seeded problems ``Compute a<op>b.`` with operands in ``0..max_operand``.

    Subtraction puts the larger operand first, so every answer is a non-negative integer.
    The same arguments always give the same tasks.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    if max_operand < 1:
        raise ValueError(f"max_operand must be at least 1, got {max_operand}")
    unknown = [op for op in ops if op not in ARITH_OPS]
    if not ops or unknown:
        raise ValueError(f"ops must be a non-empty subset of {', '.join(ARITH_OPS)}; got {list(ops)}")
    rng = random.Random(seed)
    tasks: list[EnvTask] = []
    for i in range(count):
        op = ops[rng.randrange(len(ops))]
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        if op == "-" and b > a:
            a, b = b, a
        value = a + b if op == "+" else a - b if op == "-" else a * b
        tasks.append(
            EnvTask(
                task_id=f"arith-{seed}-{i}",
                prompt=f"Compute {a}{op}{b}.",
                answer=str(value),
                source=f"arith:seed={seed}:{i}",
            )
        )
    return tasks


def render_ideal_reply(task: EnvTask) -> str:
    """The reply that earns full reward (``#### 7``): the target of a supervised warm-up."""
    return f"{ANSWER_MARK} {task.answer}"


def load_gsm8k(path: Path | str = GSM8K_SAMPLE, grader: GraderName = "numeric") -> list[EnvTask]:
    """Rows ``{"question", "answer"}`` whose answer ends ``#### N``; the reference is what follows the last ``####``.

    Raises :class:`~jigsaw_engine.envs.dataset_error.DatasetError` naming every bad line.
    """

    def check(fields: Mapping[str, str]) -> str | None:
        reference = _final_answer(fields["answer"])
        if not reference:
            return f'field "answer" does not end with "{ANSWER_MARK} <final answer>"'
        return check_reference(grader, reference)

    rows = read_jsonl_rows(path, ("question", "answer"), hint=_GSM8K_HINT, check=check)
    stem = Path(path).stem
    return [
        EnvTask(
            task_id=f"{stem}:{row.line}",
            prompt=row.fields["question"].strip(),
            answer=_final_answer(row.fields["answer"]),
            source=f"{path}:{row.line}",
        )
        for row in rows
    ]


def _final_answer(worked: str) -> str:
    return extract_answer(worked) or ""


class MathEnv(SingleTurnEnv):
    """One reply per math task, graded (by default) as a number: ``#### 7``, ``#### 7.0`` and ``#### $7`` all pass."""

    def __init__(self, tasks: Sequence[EnvTask], *, grader: GraderName = "numeric", name: str = "math") -> None:
        super().__init__(tasks, grader=grader, name=name)
