"""The child process behind an installed reward: loads it by name, scores reply after reply.

The protocol is :mod:`jigsaw_engine.envs.child_pool`'s: ``{"ready": true}`` (or ``{"error": ...}``
when the reward does not load), then for each ``{"op": "grade", "items": [[reply, reference], ...]}``
one line per item, ``{"value": <a finite number>}`` or ``{"error": "<why, for the sample>"}``.
The reward's own prints go to standard error (the engine's log), never into the protocol.

Run as ``python -m jigsaw_engine.envs.reward_worker NAME``; it reads requests until stdin closes.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import TextIO

MAX_REASON_CHARS = 300


def _write(out: TextIO, value: object) -> None:
    out.write(json.dumps(value) + "\n")
    out.flush()


def score_answer(value: object) -> dict[str, object]:
    """What one call returned, as the protocol's answer: a finite number, or why it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return {"error": f"returned {shown} ({type(value).__name__}), not a number"}
    if not math.isfinite(value):
        return {"error": f"returned {value!r}, not a finite number"}
    return {"value": float(value)}


def _reason(exc: BaseException) -> str:
    text = f"raised {type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def main(argv: list[str]) -> int:
    # The protocol keeps the real standard output; anything the reward prints goes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    from jigsaw_engine.envs.reward_registry import load_reward

    try:
        score = load_reward(argv[0]).score
    except Exception as exc:
        _write(out, {"error": f"reward {argv[0]!r} did not load: {_reason(exc)}"})
        return 1
    _write(out, {"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        for reply, reference in request["items"]:
            try:
                answer = score_answer(score(reply, reference))
            except Exception as exc:  # the reward's failure is this reply's, not the job's
                answer = {"error": _reason(exc)}
            _write(out, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
