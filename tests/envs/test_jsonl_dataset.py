"""A user's JSONL dataset: good rows become tasks, every bad line is named in one error."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw_engine.envs.dataset_error import DatasetError
from jigsaw_engine.envs.jsonl_dataset import JsonlEnv, load_dataset_tasks
from jigsaw_engine.envs.jsonl_rows import MAX_REPORTED_LINES
from jigsaw_engine.errors import JigsawError


def write(tmp_path: Path, text: str, name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_good_rows_become_tasks(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"prompt": "2+2?", "answer": "4"}\n\n   \n{"prompt": "Capital?", "answer": " 1,000 ", "id": "cap", "x": 1}\n',
    )
    tasks = load_dataset_tasks(path, "numeric")
    assert [(t.task_id, t.prompt, t.answer, t.source) for t in tasks] == [
        ("data:1", "2+2?", "4", f"{path}:1"),
        ("cap", "Capital?", "1,000", f"{path}:4"),
    ]
    env = JsonlEnv(path, "numeric")
    assert env.max_turns == 1 and env.name == "jsonl"
    assert env.episode(tasks[1]).respond("#### 1000").reward == 1.0
    assert env.episode(tasks[0]).respond("#### 5").reward == 0.0


def test_exact_match_grader(tmp_path: Path) -> None:
    env = JsonlEnv(write(tmp_path, '{"prompt": "Colour of the sky?", "answer": "Blue"}\n'), "exact_match")
    task = env.dataset()[0]
    assert env.episode(task).respond("#### blue").reward == 1.0
    assert env.episode(task).respond("#### red").reward == 0.0


def test_every_bad_line_is_named_in_one_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\n".join(
            [
                '{"prompt": "ok", "answer": "1"}',
                '{"prompt": "no answer"}',
                '{"prompt": "ok", "answer": 42}',
                "not json",
                '["a", "list"]',
                '{"prompt": "  ", "answer": "3"}',
                "",
                '{"prompt": "ok", "answer": "x", "id": 7}',
                '{"answer": "5"}',
            ]
        ),
    )
    with pytest.raises(DatasetError) as caught:
        load_dataset_tasks(path, "numeric")
    error = caught.value
    assert isinstance(error, JigsawError) and error.code == "dataset_error"
    assert error.path == str(path)
    assert error.problems == [
        f'{path}:2: missing field "answer"',
        f'{path}:3: field "answer" must be a string, got the number 42 (write "42")',
        f"{path}:4: not valid JSON (Expecting value at column 1)",
        f"{path}:5: expected a JSON object, got a list",
        f'{path}:6: field "prompt" is empty',
        f'{path}:8: field "id" must be a string, got the number 7 (write "7"), '
        "answer 'x' is not a number, which the numeric grader needs",
        f'{path}:9: missing field "prompt"',
    ]
    message = str(error)
    assert message.startswith(f'{path}:2: missing field "answer"; ')
    assert message.endswith(
        '; each line needs {"prompt": ..., "answer": ...} (or "messages": [{"role": ..., "content": ...}, ...])'
    )


def test_message_matches_the_documented_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, '{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": "2"}\n{"prompt": "c"}\n')
    with pytest.raises(DatasetError) as caught:
        load_dataset_tasks("data.jsonl", "numeric")
    assert str(caught.value) == (
        'data.jsonl:3: missing field "answer"; '
        'each line needs {"prompt": ..., "answer": ...} (or "messages": [{"role": ..., "content": ...}, ...])'
    )


def test_many_bad_lines_are_capped_and_counted(tmp_path: Path) -> None:
    path = write(tmp_path, "{}\n" * (MAX_REPORTED_LINES + 5))
    with pytest.raises(DatasetError) as caught:
        load_dataset_tasks(path, "exact_match")
    assert len(caught.value.problems) == MAX_REPORTED_LINES
    assert caught.value.omitted == 5
    assert "and 5 more bad lines" in str(caught.value)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_file_is_an_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(DatasetError, match=r"data\.jsonl: no rows"):
        load_dataset_tasks(path, "numeric")


def test_missing_file_and_bad_bytes(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"absent\.jsonl: cannot read file"):
        load_dataset_tasks(tmp_path / "absent.jsonl", "numeric")
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"prompt": "a", "answer": "1"}\n{"prompt": "\xff", "answer": "2"}\r\n')
    with pytest.raises(DatasetError) as caught:
        load_dataset_tasks(path, "numeric")
    assert caught.value.problems == [f"{path}:2: not valid UTF-8"]


def test_duplicate_ids_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, '{"prompt": "a", "answer": "1", "id": "q"}\n{"prompt": "b", "answer": "2", "id": "q"}\n')
    with pytest.raises(DatasetError, match=r'data.jsonl:2: id "q" already used on line 1'):
        load_dataset_tasks(path, "numeric")


def test_unknown_grader(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown reward"):
        JsonlEnv(write(tmp_path, '{"prompt": "a", "answer": "1"}\n'), "fuzzy")
