"""Rewards for verifiable answers: find the model's final answer, compare it with the reference.

For ``numeric`` and ``exact_match``, replies end GSM8K-style with ``#### <answer>``; only what
follows the last ``####`` counts, so a model may reason (or ramble) before it. ``math`` reads the
answer as verl's math recipes do, from ``\\boxed{}`` or LaTeX (:mod:`jigsaw_engine.envs.math_grader`).
Every grader returns 1.0 or 0.0: a binary, verifiable reward that a policy cannot earn by
sounding close.

They are the rewards every installation has, registered as ``jigsawrl.rewards`` entry points
like an operator's own (:mod:`jigsaw_engine.envs.reward_registry`); a spec's ``data.grader`` may
name any installed reward, and :func:`get_grader` runs one that is not built in in a child
process with its time limit (:mod:`jigsaw_engine.envs.reward_sandbox`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, get_args

from jigsaw_engine.envs.math_worker import ALARM_S
from jigsaw_engine.envs.reward import Reward

ANSWER_MARK = "####"

BuiltinGrader = Literal["exact_match", "numeric", "math"]
GRADER_NAMES: tuple[BuiltinGrader, ...] = get_args(BuiltinGrader)
"""The built-in graders; any installed reward's name is a :data:`GraderName`."""
GraderName = str
IN_PROCESS_GRADERS: frozenset[str] = frozenset({"exact_match", "numeric"})
"""Built-ins that run in the environment's own process: a regular expression over a reply the
spec's ``max_response_length`` bounds. Every other reward runs in a child with a time limit."""
MATH_TIME_LIMIT_S = 2 * ALARM_S + 4.0
"""The ``math`` grader's deadline per reply: math-verify's own alarm for a parse and for a
comparison, and what the alarm cannot interrupt (:mod:`jigsaw_engine.envs.math_grader`)."""

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


GRADERS: Mapping[BuiltinGrader, Grader] = {
    "exact_match": grade_exact_match,
    "numeric": grade_numeric,
    "math": grade_math,
}

_SUITS_MARK = "single-turn tasks whose replies end with #### <answer>"
EXACT_MATCH_REWARD = Reward(
    grade_exact_match,
    description="1 when the answer after the last #### starts with the reference's words "
    "(case, spacing and edge punctuation aside), else 0",
    suits=f"{_SUITS_MARK}, a word or phrase (short-answer QA)",
)
NUMERIC_REWARD = Reward(
    grade_numeric,
    description="1 when the first number after the last #### equals the reference's within 1e-6, else 0",
    suits=f"{_SUITS_MARK}, a number (GSM8K, arithmetic)",
)
MATH_REWARD = Reward(
    grade_math,
    description="1 when the reply's answer (\\boxed{}, LaTeX or a plain expression) equals the "
    "reference mathematically (math-verify, as verl's math recipes), else 0",
    suits="math datasets whose references are LaTeX or numbers (MATH, AIME, DeepScaleR)",
    time_limit_s=MATH_TIME_LIMIT_S,
)
BUILTIN_REWARDS: Mapping[BuiltinGrader, Reward] = {
    "exact_match": EXACT_MATCH_REWARD,
    "numeric": NUMERIC_REWARD,
    "math": MATH_REWARD,
}
"""The built-in graders as rewards: what ``pyproject.toml``'s ``jigsawrl.rewards`` entry points name."""


def parse_grader_name(name: str) -> GraderName:
    """``name`` if it is an installed reward; ValueError listing the installed ones otherwise."""
    from jigsaw_engine.envs.reward_registry import find_reward

    return find_reward(name).name


def get_grader(name: str) -> Grader:
    """The reward called ``name`` as a grader; ValueError listing the installed ones otherwise.

    A built-in is its function; any other installed reward runs in a child process with its
    time limit, and raises :class:`~jigsaw_engine.envs.reward.RewardError` when it fails.
    """
    if name in GRADERS:
        return GRADERS[name]  # type: ignore[index]  # narrowed by the membership test
    from jigsaw_engine.envs.reward_sandbox import sandboxed_reward

    return sandboxed_reward(parse_grader_name(name))


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
    if grader not in GRADERS:  # an installed reward: what it accepts is its own affair
        return [None] * len(references)
    return [check_reference(grader, reference) for reference in references]
