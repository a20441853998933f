"""Users' datasets beyond JSONL prompts: verl's Parquet layout and JSONL conversations, read into
tasks with their messages and data source, and every problem named by its column, row or line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jigsaw_engine.api import check_dataset_text
from jigsaw_engine.envs.dataset_error import DatasetError
from jigsaw_engine.envs.jsonl_dataset import JsonlEnv, load_dataset_tasks

SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


def verl_rows() -> list[dict[str, Any]]:
    """Two GSM8K rows and one MATH row, as verl's data preprocessing scripts write them."""
    return [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": "Natalia sold 48 clips in April and half as many in May. Total?"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "72"},
            "extra_info": {"split": "train", "index": 0},
        },
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": "Weng earns $12 an hour for 50 minutes. How much?"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "10"},
            "extra_info": {"split": "train", "index": 1},
        },
        {
            "data_source": "DigitalLearningGmbH/MATH-lighteval",
            "prompt": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "What is $\\frac{2}{4}$ in lowest terms?"},
            ],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "\\frac{1}{2}"},
            "extra_info": {"split": "train", "index": 0},
        },
    ]


def write_parquet(tmp_path: Path, rows: list[dict[str, Any]] | pa.Table, name: str = "train.parquet") -> Path:
    path = tmp_path / name
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows)
    pq.write_table(table, path)
    return path


def test_verl_parquet_rows_become_tasks_with_their_conversation(tmp_path: Path) -> None:
    path = write_parquet(tmp_path, verl_rows())
    tasks = load_dataset_tasks(path, "math")
    assert [(t.task_id, t.answer, t.data_source, t.source) for t in tasks] == [
        ("train:1", "72", "openai/gsm8k", f"{path}:row 1"),
        ("train:2", "10", "openai/gsm8k", f"{path}:row 2"),
        ("train:3", "\\frac{1}{2}", "DigitalLearningGmbH/MATH-lighteval", f"{path}:row 3"),
    ]
    math_task = tasks[2]
    assert math_task.prompt == "What is $\\frac{2}{4}$ in lowest terms?"
    assert math_task.messages == (("system", SYSTEM), ("user", "What is $\\frac{2}{4}$ in lowest terms?"))
    assert tasks[0].messages == (("user", tasks[0].prompt),)

    env = JsonlEnv(path, "math")
    assert env.episode(math_task).respond("Halve both: \\boxed{0.5}").reward == 1.0
    assert env.episode(tasks[0]).respond("48 + 24 = \\boxed{72}").reward == 1.0
    assert env.episode(tasks[0]).respond("\\boxed{71}").reward == 0.0


def test_a_missing_column_is_named_with_the_columns_the_file_has(tmp_path: Path) -> None:
    no_truth = [{k: v for k, v in row.items() if k != "reward_model"} for row in verl_rows()]
    with pytest.raises(DatasetError) as caught:
        load_dataset_tasks(write_parquet(tmp_path, no_truth), "math")
    (problem,) = caught.value.problems
    assert 'no column "reward_model.ground_truth"' in problem
    assert "the columns are: data_source, prompt, ability, extra_info" in problem

    no_prompt = [{k: v for k, v in row.items() if k != "prompt"} for row in verl_rows()]
    with pytest.raises(DatasetError, match=r'no column "prompt" \(the columns are: data_source, ability, '):
        load_dataset_tasks(write_parquet(tmp_path, no_prompt, "b.parquet"), "math")

    style_only = [{**row, "reward_model": {"style": "rule"}} for row in verl_rows()]
    with pytest.raises(DatasetError, match=r"reward_model's fields are: style"):
        load_dataset_tasks(write_parquet(tmp_path, style_only, "c.parquet"), "math")


def test_a_prompt_that_is_not_a_list_of_messages_names_the_row(tmp_path: Path) -> None:
    table = pa.table(
        {
            "data_source": ["a", "a", "a"],
            "prompt": ["fine as a string?", "no", "still no"],
            "reward_model": [{"ground_truth": "1"}, {"ground_truth": "2"}, {"ground_truth": "3"}],
        }
    )
    with pytest.raises(DatasetError) as caught:
        load_dataset_tasks(write_parquet(tmp_path, table), "numeric")
    assert caught.value.problems[1] == (
        f"{tmp_path / 'train.parquet'}: row 2 (index 1): "
        'field "prompt" must be a list of {"role", "content"} messages, got a string'
    )
    rows = verl_rows()
    rows[1]["prompt"] = [{"role": "robot", "content": "hi"}]
    rows[2]["prompt"] = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    found = check_dataset_text(write_parquet(tmp_path, rows, "d.parquet").read_bytes(), "d.parquet")
    assert found.row_count == 1
    assert [(p.field, p.message) for p in found.problems] == [
        ("rows[2]", 'row 2 (index 1): prompt[0].role must be one of system, user, assistant, got "robot"'),
        (
            "rows[3]",
            'row 3 (index 2): the last message of "prompt" must be the user\'s (the model answers it), got "assistant"',
        ),
    ]


def test_empty_and_unreadable_parquet_files_are_refused(tmp_path: Path) -> None:
    empty = pa.Table.from_pylist(verl_rows()).slice(0, 0)
    with pytest.raises(DatasetError, match=r"train\.parquet: no rows \(the file is empty\)"):
        load_dataset_tasks(write_parquet(tmp_path, empty), "numeric")
    bogus = tmp_path / "bogus.parquet"
    bogus.write_text('{"prompt": "a", "answer": "1"}\n')
    with pytest.raises(DatasetError, match=r"bogus\.parquet: not a Parquet file"):
        load_dataset_tasks(bogus, "numeric")


def test_the_upload_check_reads_parquet_by_its_bytes_and_checks_the_grader(tmp_path: Path) -> None:
    data = write_parquet(tmp_path, verl_rows()).read_bytes()
    found = check_dataset_text(data, "gsm8k-and-math", grader="math")
    assert (found.format, found.row_count, found.problems) == ("parquet", 3, [])
    assert [(r.line, r.answer) for r in found.preview] == [(1, "72"), (2, "10"), (3, "\\frac{1}{2}")]
    numeric = check_dataset_text(data, "gsm8k-and-math.parquet", grader="numeric")
    assert numeric.problem_count == 0  # "\frac{1}{2}" holds the number 1: numeric is lenient
    bad = verl_rows()
    bad[0]["reward_model"] = {"style": "rule", "ground_truth": "\\frac{1}{"}
    found = check_dataset_text(write_parquet(tmp_path, bad, "e.parquet").read_bytes(), "e", grader="math")
    assert [p.field for p in found.problems] == ["rows[1]"]
    assert "is not math that the math grader can read" in found.problems[0].message


def test_jsonl_rows_may_give_a_conversation_and_verl_style_ground_truth(tmp_path: Path) -> None:
    lines = [
        {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "1/2 + 1/2?"}], "answer": "1"},
        {"prompt": [{"role": "user", "content": "2+2?"}], "reward_model": {"ground_truth": 4}, "data_source": "toy"},
        {"prompt": "3+3?", "answer": "6"},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tasks = load_dataset_tasks(path, "numeric")
    assert [(t.prompt, t.messages, t.answer, t.data_source) for t in tasks] == [
        ("1/2 + 1/2?", (("system", SYSTEM), ("user", "1/2 + 1/2?")), "1", ""),
        ("2+2?", (("user", "2+2?"),), "4", "toy"),
        ("3+3?", (), "6", ""),
    ]


def test_bad_jsonl_conversations_are_named_by_line(tmp_path: Path) -> None:
    lines = [
        '{"messages": "hello", "answer": "1"}',
        '{"messages": [], "answer": "1"}',
        '{"messages": [{"role": "user"}], "answer": "1"}',
        '{"messages": [{"role": "user", "content": "q"}], "prompt": "q", "answer": "1"}',
        '{"messages": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": ["1", "2"]}}',
        '{"messages": [{"role": "user", "content": "q"}], "answer": "1"}',
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(DatasetError) as caught:
        load_dataset_tasks(path, "numeric")
    assert caught.value.problems == [
        f'{path}:1: field "messages" must be a list of {{"role", "content"}} messages, got a string',
        f'{path}:2: field "messages" is an empty list; it needs a list of {{"role", "content"}} messages',
        f"{path}:3: messages[0].content must be a non-empty string, got nothing",
        f'{path}:4: give "prompt" or "messages", not both',
        f'{path}:5: "reward_model.ground_truth" must be a string or a number, got a list',
    ]


def test_jigsaw_validate_checks_a_dataset_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jigsaw_engine.cli import main

    good = write_parquet(tmp_path, verl_rows())
    assert main(["validate", str(good), "--grader", "math"]) == 0
    assert capsys.readouterr().out.strip() == f"{good}: ok (3 rows, parquet, answers fit the math grader)"

    rows = verl_rows()
    rows[0]["prompt"] = [{"role": "user", "content": " "}]
    bad = write_parquet(tmp_path, rows, "bad.parquet")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: 1 bad row" in err
    assert f"{bad}: row 1 (index 0): prompt[0].content must be a non-empty string, got an empty string" in err

    no_column = write_parquet(tmp_path, [{"prompt": r["prompt"]} for r in verl_rows()], "cols.parquet")
    assert main(["validate", str(no_column)]) == 2
    assert f'{no_column}: no column "reward_model.ground_truth" (the columns are: prompt)' in capsys.readouterr().err
