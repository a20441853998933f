"""Final-answer extraction and the two graders, table-driven."""

from __future__ import annotations

import pytest

from jigsaw_engine.envs.graders import (
    GRADER_NAMES,
    check_reference,
    extract_answer,
    get_grader,
    grade_exact_match,
    grade_numeric,
    parse_grader_name,
    parse_number,
)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("#### 7", "7"),
        ("reasoning 3+4=7\n#### 7", "7"),
        ("#### 3 then #### 4", "4"),
        ("#### 1\n#### 2\nmore text", "2"),
        ("####\n7", "7"),
        ("#### 42 apples\nthe end", "42 apples"),
        ("no marker at all", None),
        ("####", None),
        ("####   \n  ", None),
        ("", None),
    ],
)
def test_extract_answer(reply: str, expected: str | None) -> None:
    assert extract_answer(reply) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,234", 1234.0),
        ("$5", 5.0),
        ("7.", 7.0),
        ("7.0", 7.0),
        ("-7", -7.0),
        ("$-7.50", -7.5),
        ("-$3", -3.0),
        (".5", 0.5),
        ("12,345,678.25 apples", 12345678.25),
        ("about 40 or 50", 40.0),
        ("no number", None),
        ("", None),
    ],
)
def test_parse_number(text: str, expected: float | None) -> None:
    assert parse_number(text) == expected


@pytest.mark.parametrize(
    ("reply", "reference", "reward"),
    [
        ("#### 1,234", "1234", 1.0),
        ("#### 1234", "1,234", 1.0),
        ("#### $5", "5", 1.0),
        ("#### 7.", "7", 1.0),
        ("#### 7.0", "7", 1.0),
        ("#### 7.0000001", "7", 1.0),
        ("#### 7.001", "7", 0.0),
        ("#### 42 apples", "42", 1.0),
        ("#### -7", "-7", 1.0),
        ("#### 7", "-7", 0.0),
        ("#### 7.5", "7.50", 1.0),
        ("7", "7", 0.0),
        ("the answer is 7", "7", 0.0),
        ("#### 9 #### 7", "7", 1.0),
        ("#### 7 #### 9", "7", 0.0),
        ("#### seven", "7", 0.0),
        ("#### 7", "seven", 0.0),
    ],
)
def test_grade_numeric(reply: str, reference: str, reward: float) -> None:
    assert grade_numeric(reply, reference) == reward


@pytest.mark.parametrize(
    ("reply", "reference", "reward"),
    [
        ("#### Velmora", "Velmora", 1.0),
        ("####   velmora.", "Velmora", 1.0),
        ("#### VELMORA, I think", "Velmora", 1.0),
        ("#### Grey   Sea", "grey sea", 1.0),
        ("#### Grey", "Grey Sea", 0.0),
        ("#### Ostrand", "Velmora", 0.0),
        ("#### Velmora #### Ostrand", "Velmora", 0.0),
        ("Velmora", "Velmora", 0.0),
        ("#### 1,234", "1234", 0.0),
    ],
)
def test_grade_exact_match(reply: str, reference: str, reward: float) -> None:
    assert grade_exact_match(reply, reference) == reward


def test_grader_lookup() -> None:
    assert GRADER_NAMES == ("exact_match", "numeric", "math")
    assert get_grader("numeric") is grade_numeric
    assert get_grader("exact_match") is grade_exact_match
    assert parse_grader_name("numeric") == "numeric"
    with pytest.raises(ValueError, match=r"unknown reward 'fuzzy'; installed rewards: exact_match, numeric, math"):
        get_grader("fuzzy")


def test_check_reference() -> None:
    assert check_reference("numeric", "$1,234") is None
    assert check_reference("numeric", "many") is not None
    assert check_reference("exact_match", "many") is None
    assert check_reference("exact_match", "...") is not None
