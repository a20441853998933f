"""Run every fault scenario against one stack and print the table of fault x outcome.

.venv/bin/python -m tests.faults.suite [--only NAME ...] [--speed X]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from devstack.launcher import ROOT
from tests.faults.scenarios import REAL_FAILPOINTS, SCENARIOS, Outcome, format_table, run_scenario
from tests.faults.stack import FaultStack

LOG_DIR = ROOT / "test-artifacts" / "faults"
ENGINE_SPEED = 40.0
"""Simulated seconds per wall second: a 12-step job of the suite takes about 9 s, so a fault
after step 2 lands with most of it still to run."""


def run_suite(*, only: list[str] | None = None, speed: float = ENGINE_SPEED, log_dir: Path = LOG_DIR) -> list[Outcome]:
    """Simulated scenarios on one stack, then real ones on a real-mode stack."""
    chosen = [s for s in SCENARIOS if not only or any(o.lower() in s.fault.lower() for o in only)]
    outcomes: list[Outcome] = []
    for real in (False, True):
        batch = [s for s in chosen if s.real == real]
        if not batch:
            continue
        stack = FaultStack(
            engine_speed=speed,
            log_dir=log_dir / ("real" if real else "simulated"),
            real=real,
            engine_failpoints=REAL_FAILPOINTS if real else "",
        )
        try:
            started = time.monotonic()
            stack.start()
            print(f"{'real' if real else 'simulated'} stack up in {time.monotonic() - started:.0f} s", flush=True)
            for scenario in batch:
                started = time.monotonic()
                outcome = run_scenario(stack, scenario, SCENARIOS.index(scenario))
                verdict = "ok" if outcome.passed else "FAILED"
                print(f"{scenario.fault}: {verdict} in {time.monotonic() - started:.0f} s", flush=True)
                outcomes.append(outcome)
        finally:
            stack.stop()
    log_dir.mkdir(parents=True, exist_ok=True)
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
