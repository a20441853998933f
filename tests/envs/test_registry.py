"""Building environments by name, and the errors a mistyped spec gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw_engine.envs.dataset_error import DatasetError
from jigsaw_engine.envs.registry import ENV_NAMES, make_env


def test_every_known_env_builds(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"prompt": "2+2?", "answer": "4"}\n')
    options: dict[str, dict[str, object]] = {"jsonl": {"path": str(data), "grader": "numeric"}}
    for name in ENV_NAMES:
        env = make_env(name, **options.get(name, {}))
        assert env.dataset() and env.max_turns >= 1
        task = env.dataset()[0]
        assert task.task_id and task.source
        assert env.episode(task).respond(f"#### {task.answer}").reward == 1.0


def test_options_reach_the_env() -> None:
    math = make_env("math", seed=5, count=7, max_operand=3, ops=["*"])
    assert len(math.dataset()) == 7 and all("*" in t.prompt for t in math.dataset())
    assert math.dataset()[0].source == "arith:seed=5:0"
    refine = make_env("self_refine", count=4, max_turns=5, decay=0.25)
    assert refine.name == "self_refine" and refine.max_turns == 5 and len(refine.dataset()) == 4
    gsm = make_env("self_refine", dataset="gsm8k")
    assert len(gsm.dataset()) >= 40
    assert make_env("gsm8k").name == "gsm8k"
    assert make_env("retrieval", k=1, max_turns=4).max_turns == 4


def test_unknown_env_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown env 'chess'; known envs: math, gsm8k, self_refine, retrieval, jsonl"
    ):
        make_env("chess")


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("math", {"seeds": 1}, r"unknown option\(s\) for env 'math': seeds; known options: seed, count"),
        ("math", {"count": "10"}, r"option 'count' of env 'math' must be an integer"),
        ("math", {"count": True}, r"must be an integer"),
        ("math", {"ops": [1]}, r"must be a list of strings"),
        ("math", {"ops": ["/"]}, r"ops must be a non-empty subset"),
        ("jsonl", {"grader": "numeric"}, r"env 'jsonl' needs option 'path'"),
        ("jsonl", {"path": "x.jsonl"}, r"env 'jsonl' needs option 'grader'"),
        ("gsm8k", {"grader": "fuzzy"}, r"unknown reward 'fuzzy'"),
        ("self_refine", {"dataset": "trivia"}, r"must be 'arith' or 'gsm8k'"),
        ("self_refine", {"path": "x.jsonl"}, r"needs dataset='gsm8k'"),
        ("self_refine", {"decay": "half"}, r"must be a number"),
        ("retrieval", {"k": 0}, r"k must be at least 1"),
    ],
)
def test_bad_options(name: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_env(name, **options)


def test_bad_file_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"missing\.jsonl: cannot read file"):
        make_env("jsonl", path=tmp_path / "missing.jsonl", grader="exact_match")
