"""The child process behind the ``math`` grader: math-verify on its own main thread.

math-verify bounds its parsing and comparisons with ``signal.alarm``, which only works on a main
thread; the engine grades from Ray actors' threads. So the grading runs here, one process per
busy grader, started by :mod:`jigsaw_engine.envs.math_grader`, which also kills it when even
the alarm cannot interrupt it (a huge power computed in C). The protocol is JSON lines: one
``{"ready": true}`` (or ``{"error": ...}``) at start, then for each request ``{"op", "items"}``
one answer line per item, in order, so the parent can give each item its own deadline.

Run as ``python -m jigsaw_engine.envs.math_worker``; it reads requests until stdin closes.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

ALARM_S = 3
"""math-verify's own limit per parse and per comparison, in whole seconds (``signal.alarm``)."""


def _write(out: TextIO, value: object) -> None:
    out.write(json.dumps(value) + "\n")
    out.flush()


def main() -> int:
    out = sys.stdout
    try:
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
        from math_verify.errors import TimeoutException
    except ImportError as exc:
        _write(out, {"error": f"the math grader needs math-verify ({exc}): pip install 'jigsawrl[rl]'"})
        return 1
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    def gold(reference: str) -> list[Any]:
        # verl's math_verify reward: the ground truth is read as the content of a \boxed{}.
        parsed: list[Any] = parse(
            "\\boxed{" + reference + "}",
            extraction_config=[LatexExtractionConfig()],
            parsing_timeout=ALARM_S,
        )
        return parsed

    def grade(item: list[str]) -> float:
        reply, reference = item
        predicted = parse(
            reply, extraction_config=[ExprExtractionConfig(), LatexExtractionConfig()], parsing_timeout=ALARM_S
        )
        return 1.0 if predicted and verify(gold(reference), predicted, timeout_seconds=ALARM_S) else 0.0

    def check(reference: str) -> bool:
        parsed: list[Any] = parse(
            "\\boxed{" + reference + "}",
            extraction_config=[LatexExtractionConfig()],
            fallback_mode="no_fallback",
            parsing_timeout=ALARM_S,
        )
        return bool(parsed)

    _write(out, {"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        for item in request["items"]:
            try:
                value: object = grade(item) if request["op"] == "grade" else check(item)
            except (Exception, TimeoutException):  # math-verify swallows its errors; any that escape earn nothing
                value = 0.0 if request["op"] == "grade" else False
            _write(out, {"value": value})
    return 0


if __name__ == "__main__":
    sys.exit(main())
