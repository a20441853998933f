"""Rewards for verifiable answers: find the model's final answer, compare it with the reference.

For ``numeric`` and ``exact_match``, replies end GSM8K-style with ``#### <answer>``; only what
follows the last ``####`` counts, so a model may reason (or ramble) before it. ``math`` reads the
answer as verl's math recipes do, from ``\\boxed{}`` or LaTeX (:mod:`jigsaw_engine.envs.math_grader`).
Every grader returns 1.0 or 0.0: a binary, verifiable reward that a policy cannot earn by
sounding close.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, get_args

ANSWER_MARK = "####"

GraderName = Literal["exact_match", "numeric", "math"]
GRADER_NAMES: tuple[GraderName, ...] = get_args(GraderName)

Grader = Callable[[str, str], float]
"""``grader(reply, reference) -> reward``: the whole model reply, the reference answer."""

_NUMBER = re.compile(
    r"(?P<sign>[-+])?\$?(?P<sign2>-)?"
    r"(?P<digits>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"
)
_EDGE_PUNCTUATION = ".,;:!?\"'`()[]{}*"
NUMERIC_TOLERANCE = 1e-6


def extract_answer(reply: str) -> str | None:
    """The final answer: the first line of what follows the last ``####``, stripped; None when absent or empty."""
    _, mark, tail = reply.rpartition(ANSWER_MARK)
    if not mark:
        return None
    stripped = tail.strip()
    if not stripped:
        return None
    return stripped.splitlines()[0].strip()


def parse_number(text: str) -> float | None:
    """The first number in ``text``, tolerant of ``$``, ``,`` thousands separators and a trailing ``.``."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    value = float(match["digits"].replace(",", ""))
    negative = (match["sign"] == "-") != (match["sign2"] == "-")
    return -value if negative else value


def normalize_words(text: str) -> list[str]:
    """Lower-cased words, punctuation trimmed from their edges, empty ones dropped."""
    words = (word.strip(_EDGE_PUNCTUATION) for word in text.lower().split())
    return [word for word in words if word]


def grade_exact_match(reply: str, reference: str) -> float:
    """1.0 when the answer's first N words equal the reference's N words (case, spacing, edge punctuation aside).

    For a one-word reference this is the answer's first token, so ``#### Ostrand, I think`` counts.
    """
    answer = extract_answer(reply)
    expected = normalize_words(reference)
    if answer is None or not expected:
        return 0.0
    return 1.0 if normalize_words(answer)[: len(expected)] == expected else 0.0


def grade_numeric(reply: str, reference: str) -> float:
    """1.0 when the answer's first number equals the reference's within 1e-6 (``#### $1,234.`` is 1234)."""
    answer = extract_answer(reply)
    if answer is None:
        return 0.0
    got, expected = parse_number(answer), parse_number(reference)
    if got is None or expected is None:
        return 0.0
    return 1.0 if math.isclose(got, expected, rel_tol=1e-9, abs_tol=NUMERIC_TOLERANCE) else 0.0


def grade_math(reply: str, reference: str) -> float:
    """1.0 when the reply's answer (``\\boxed{}``, LaTeX, a plain expression) equals the reference mathematically."""
    from jigsaw_engine.envs.math_grader import grade_math as grade

    return grade(reply, reference)


GRADERS: Mapping[GraderName, Grader] = {
    "exact_match": grade_exact_match,
    "numeric": grade_numeric,
    "math": grade_math,
}


def parse_grader_name(name: str) -> GraderName:
    """``name`` as a :data:`GraderName`; ValueError naming the known graders otherwise."""
    if name not in GRADER_NAMES:
        raise ValueError(f"unknown grader {name!r}; known graders: {', '.join(GRADER_NAMES)}")
    return name


def get_grader(name: str) -> Grader:
    """The grader called ``name``; ValueError naming the known graders otherwise."""
    return GRADERS[parse_grader_name(name)]


def check_reference(grader: GraderName, reference: str) -> str | None:
    """Why ``reference`` could never earn a reward under ``grader``, or None when it can."""
    if grader == "numeric" and parse_number(reference) is None:
        return f"answer {reference!r} is not a number, which the numeric grader needs"
    if grader == "exact_match" and not normalize_words(reference):
        return f"answer {reference!r} has no words to match"
    if grader == "math":
        return check_references(grader, [reference])[0]
    return None


def check_references(grader: GraderName, references: Sequence[str]) -> list[str | None]:
    """:func:`check_reference` for many references at once (``math`` reads them in one batch)."""
    if grader == "math":
        from jigsaw_engine.envs.math_grader import check_math_references

        return check_math_references(references)
    return [check_reference(grader, reference) for reference in references]
