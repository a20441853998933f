"""The fault-injection suite, in the test command: the whole stack in separate processes on
private Postgres and Redis, eight faults injected while jobs run (simulated full-size ones of two
tenants, then tiny ones trained for real: a job's rollout workers' processes killed
mid-generation, its trainer's process mid-update, the engine mid-generation), and after each
every job ends correctly with nothing lost, repeated or double-billed, and the dashboard's
stream resumes. The table of fault x outcome is printed and saved as a test artefact."""

from __future__ import annotations

import shutil

import pytest

from tests.faults.private_services import postgres_bin_dir
from tests.faults.scenarios import SCENARIOS, format_table
from tests.faults.suite import LOG_DIR, run_suite

pytestmark = [pytest.mark.slow]


@pytest.mark.timeout(600)  # two stacks started, eight faults: about 3-4 minutes
@pytest.mark.skipif(
    postgres_bin_dir() is None or shutil.which("redis-server") is None,
    reason="needs PostgreSQL's server binaries and redis-server to run private, killable copies",
)
def test_every_fault_leaves_jobs_correct_and_streams_resumed(capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = run_suite()
    table = format_table(outcomes)
    with capsys.disabled():
        print(f"\n{table}\n(logs in {LOG_DIR})")
    assert len(outcomes) == len(SCENARIOS)
    assert all(o.passed for o in outcomes), table
