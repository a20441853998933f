"""Generated arithmetic, the shipped GSM8K sample, and single-turn grading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigsaw_engine.envs.dataset_error import DatasetError
from jigsaw_engine.envs.math_tasks import GSM8K_SAMPLE, MathEnv, generate_arithmetic, load_gsm8k, render_ideal_reply


def test_generator_is_deterministic_by_seed() -> None:
    a = generate_arithmetic(seed=3, count=50)
    assert a == generate_arithmetic(seed=3, count=50)
    assert a != generate_arithmetic(seed=4, count=50)
    assert generate_arithmetic(seed=3, count=10) == a[:10]


def test_generator_tasks_are_short_uniform_and_correct() -> None:
    tasks = generate_arithmetic(seed=0, count=200, max_operand=9, ops=("+", "-", "*"))
    assert len({t.task_id for t in tasks}) == 200
    assert tasks[5].task_id == "arith-0-5"
    assert tasks[5].source == "arith:seed=0:5"
    for task in tasks:
        assert task.prompt.startswith("Compute ") and task.prompt.endswith(".")
        assert len(task.prompt) <= len("Compute 9*9.")
        expression = task.prompt.removeprefix("Compute ").removesuffix(".")
        a, op, b = int(expression[0]), expression[1], int(expression[2])
        assert op in "+-*" and 0 <= a <= 9 and 0 <= b <= 9
        assert int(task.answer) == (a + b if op == "+" else a - b if op == "-" else a * b)
        assert int(task.answer) >= 0
    assert {t.prompt[9] for t in tasks} == {"+", "-", "*"}


def test_generator_default_is_single_digit_addition() -> None:
    task = generate_arithmetic(seed=1, count=1)[0]
    assert task.prompt[9] == "+"
    assert render_ideal_reply(task) == f"#### {task.answer}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": 0}, "count"),
        ({"count": 5, "max_operand": 0}, "max_operand"),
        ({"count": 5, "ops": ()}, "ops"),
        ({"count": 5, "ops": ("/",)}, "ops"),
    ],
)
def test_generator_rejects_bad_parameters(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        generate_arithmetic(seed=0, **kwargs)  # type: ignore[arg-type]


def test_math_env_grades_one_reply() -> None:
    tasks = generate_arithmetic(seed=7, count=5)
    env = MathEnv(tasks)
    assert env.name == "math" and env.max_turns == 1 and env.dataset() == tuple(tasks)
    task = tasks[0]
    assert env.episode(task).respond(render_ideal_reply(task)).reward == 1.0
    assert env.episode(task).respond(f"#### {task.answer}.0").reward == 1.0
    wrong = env.episode(task).respond(f"#### {int(task.answer) + 1}")
    assert wrong.done and wrong.reward == 0.0
    assert env.episode(task).respond(task.answer).reward == 0.0  # no "####"
    episode = env.episode(task)
    episode.respond("#### 0")
    with pytest.raises(RuntimeError, match="over"):
        episode.respond("#### 0")


def test_gsm8k_sample_loads_with_references_after_the_marks() -> None:
    tasks = load_gsm8k()
    assert len(tasks) >= 40
    assert len({t.task_id for t in tasks}) == len(tasks)
    first = tasks[0]
    assert first.task_id == "gsm8k_sample:1"
    assert first.source == f"{GSM8K_SAMPLE}:1"
    assert first.prompt.startswith("Mira has 12 marbles")
    assert first.answer == "27"
    by_start = {t.prompt.split(".")[0]: t.answer for t in tasks}
    assert by_start["A library had 1,250 books"] == "1,495"
    assert by_start["A thermometer reads 3 degrees at sunset"] == "-7"
    rows = [json.loads(line) for line in GSM8K_SAMPLE.read_text().splitlines()]
    env = MathEnv(tasks, name="gsm8k")
    for row, task in zip(rows, tasks, strict=True):
        assert task.prompt == row["question"]
        # The worked answer itself is a full-reward reply.
        assert env.episode(task).respond(row["answer"]).reward == 1.0
    library = next(t for t in tasks if t.answer == "1,495")
    assert env.episode(library).respond("#### 1495").reward == 1.0


def test_gsm8k_loader_names_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"question": "q1", "answer": "2 + 2 = 4\\n#### 4"}\n'
        '{"question": "q2", "answer": "no final mark"}\n'
        '{"question": "q3", "answer": "#### lots"}\n'
    )
    with pytest.raises(DatasetError) as caught:
        load_gsm8k(path)
    message = str(caught.value)
    assert f"{path}:2: " in message and "####" in message
    assert f"{path}:3: " in message and "not a number" in message
    assert f"{path}:1:" not in message
