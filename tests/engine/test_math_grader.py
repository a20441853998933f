"""The ``math`` grader: math-verify as verl's math recipes use it, safe off the main thread and
bounded in time, and a reference it cannot read refused up front."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from jigsaw_engine.api import grade, grader_answer_problem, grader_names
from jigsaw_engine.envs import math_grader
from jigsaw_engine.envs.graders import check_reference, check_references, get_grader

grade_math = get_grader("math")


@pytest.mark.parametrize(
    ("reply", "reference", "reward"),
    [
        ("Halving gives \\boxed{\\frac{1}{2}}.", "0.5", 1.0),
        ("So the answer is \\boxed{0.5}", "\\frac{1}{2}", 1.0),
        ("\\boxed{2}", "3", 0.0),
        ("I could not work it out.", "5", 0.0),
        ("", "5", 0.0),
        ("Solving, we get $x=5$.", "5", 1.0),
        ("Solving, we get $x=6$.", "5", 0.0),
        ("The two roots: \\boxed{\\sqrt{2}}", "2^{1/2}", 1.0),
        ("48 + 24 = 72 clips.\n#### 72", "72", 1.0),
    ],
)
def test_hand_picked_replies(reply: str, reference: str, reward: float) -> None:
    assert grade_math(reply, reference) == reward


def test_the_api_offers_and_grades_with_math() -> None:
    assert "math" in grader_names()
    assert grade("math", "\\boxed{\\frac{3}{4}}", " 0.75 ") == 1.0


def test_a_reply_is_graded_from_worker_threads() -> None:
    """math-verify's own timeouts use signal.alarm, which fails off the main thread."""
    results: list[float] = []
    thread = threading.Thread(target=lambda: results.append(grade_math("\\boxed{\\frac{1}{2}}", "0.5")))
    thread.start()
    thread.join(timeout=60)
    assert results == [1.0]
    with ThreadPoolExecutor(max_workers=6) as pool:
        rewards = list(pool.map(lambda n: grade_math(f"\\boxed{{{n}}}", str(n if n % 2 else n + 1)), range(12)))
    assert rewards == [0.0 if n % 2 == 0 else 1.0 for n in range(12)]


def test_a_pathological_reply_earns_nothing_in_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(math_grader, "ITEM_DEADLINE_S", 1.5)
    done: list[float] = []
    started = time.monotonic()
    # A tower of powers: sympy computes it in C, where no alarm interrupts it; the child is killed.
    thread = threading.Thread(target=lambda: done.append(grade_math("\\boxed{9^{9^{9^{9}}}}", "1")))
    thread.start()
    thread.join(timeout=60)
    assert done == [0.0]
    assert time.monotonic() - started < 30
    assert grade_math("\\boxed{7}", "7") == 1.0  # a new child took its place


def test_references_the_grader_cannot_read_are_refused() -> None:
    assert check_reference("math", "\\frac{1}{2}") is None
    assert check_reference("math", "72") is None
    problem = check_reference("math", "\\frac{1}{")
    assert problem is not None and "'\\\\frac{1}{'" in problem and "math grader can read" in problem
    assert grader_answer_problem("math", "}{") is not None
    assert check_references("math", ["1", "}{", "x^2", "}{"]) == [
        None,
        problem.replace("\\\\frac{1}{", "}{"),
        None,
        problem.replace("\\\\frac{1}{", "}{"),
    ]
