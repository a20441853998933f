"""Run every fault scenario against one stack and print the table of fault x outcome.

.venv/bin/python -m tests.faults.suite [--only NAME ...] [--speed X]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tests.faults.scenarios import SCENARIOS, Outcome, format_table, run_scenario
from tests.faults.stack import ROOT, FaultStack

LOG_DIR = ROOT / "var" / "test-artifacts" / "faults"
ENGINE_SPEED = 40.0
"""Simulated seconds per wall second: a 12-step job of the suite takes about 10 s."""


def run_suite(*, only: list[str] | None = None, speed: float = ENGINE_SPEED, log_dir: Path = LOG_DIR) -> list[Outcome]:
    stack = FaultStack(engine_speed=speed, log_dir=log_dir)
    outcomes = []
    try:
        stack.start()
        for index, scenario in enumerate(SCENARIOS):
            if only and not any(o.lower() in scenario.fault.lower() for o in only):
                continue
            started = time.monotonic()
            outcome = run_scenario(stack, scenario, index)
            print(f"{scenario.fault}: {'ok' if outcome.passed else 'FAILED'} in {time.monotonic() - started:.0f} s",
                  flush=True)  # fmt: skip
            outcomes.append(outcome)
    finally:
        stack.stop()
    (log_dir / "fault_table.md").write_text(format_table(outcomes) + "\n")
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="scenarios whose name contains one of these words")
    parser.add_argument("--speed", type=float, default=ENGINE_SPEED)
    args = parser.parse_args()
    outcomes = run_suite(only=args.only, speed=args.speed)
    print(format_table(outcomes))
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
