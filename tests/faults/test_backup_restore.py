"""Backup and restore while jobs run (docs/operations.md#backups-and-restore): ``manage.py
backup`` mid-run, then the database and the datasets folder lost, ``manage.py restore`` into a
fresh database, and the control plane started on it beside the engine that kept running. Every
job of the backup comes back and ends as it did on the engine (a cancel made after the backup
included), each step stored and billed once, none run twice (a job admitted after the backup
is adopted, not cancelled or sent again); a job created after the backup is gone and its
pipeline is cancelled on the engine."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from tests.engine.builders import make_spec
from tests.faults.private_services import postgres_bin_dir
from tests.faults.scenarios import _wait
from tests.faults.stack import DATABASE, FaultStack
from tests.faults.suite import LOG_DIR
from webapp.jobs.reconcile import ADOPTED_REASON

pytestmark = [pytest.mark.slow]

SPEED = 8.0
"""Simulated seconds per wall second: a step of these jobs takes about a second."""
FOREVER = 1000
"""Steps of a job that must still run whenever the control plane comes back, however slowly."""
RESTORED = "jigsaw_restored"
CONTROL_PLANE = ("web", "worker", "beat")
ENDED = ("succeeded", "failed", "cancelled")
DATASET = '{"prompt": "What is 2+2?", "answer": "4"}\n'


def spec(name: str, gpus: int, steps: int) -> dict[str, Any]:
    return make_spec(name=name, resources={"num_gpus": gpus}, trainer={"total_steps": steps, "save_freq": 1})


def job_row(db: psycopg.Connection[Any], job_id: str) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT status, admitted_at IS NOT NULL, attempt, current_step FROM jobs_job WHERE id = %s", (job_id,)
    ).fetchone()
    return None if row is None else dict(zip(("status", "admitted", "attempt", "step"), row, strict=True))


def engine_states(stack: FaultStack) -> dict[str, str]:
    """What the engine itself says it runs, asked as the control plane asks it."""
    code = "import json; from webapp import engine_gateway; print(json.dumps(engine_gateway.pipeline_states()))"
    return dict(json.loads(stack.manage("shell", "-c", code).strip().splitlines()[-1]))


def assert_ran_once(db: psycopg.Connection[Any], shown: dict[str, Any]) -> None:
    """Steps 1..N stored once (N: the job's last step), each billed once (a second run bills its
    steps again), and the ledger adds up to what the job shows."""
    job_id, name = shown["id"], shown["name"]
    steps = [s for (s,) in db.execute("SELECT step FROM jobs_jobmetrics WHERE job_id = %s", (job_id,))]
    assert sorted(steps) == list(range(1, shown["progress"]["step"] + 1)), (name, steps)
    billed = db.execute("SELECT step, gpu_seconds FROM jobs_usagerecord WHERE job_id = %s", (job_id,)).fetchall()
    per_step = Counter(step for step, _ in billed if step is not None)
    assert set(per_step.values()) == {1}, (name, per_step)
    assert abs(sum(seconds for _, seconds in billed) - shown["gpu_seconds"]) < 1e-3, name


@pytest.mark.timeout(300)
@pytest.mark.skipif(
    postgres_bin_dir() is None or shutil.which("redis-server") is None,
    reason="needs PostgreSQL's server and client binaries and redis-server to run private, killable copies",
)
def test_a_backup_taken_mid_run_restores_every_job_once() -> None:
    started = time.monotonic()
    stack = FaultStack(engine_speed=SPEED, log_dir=LOG_DIR / "restore")
    pg_bin = str(stack.postgres.bin)  # pg_dump and pg_restore of the server's own major version
    datasets = stack.tmp / "datasets"
    stack.env["DATASETS_DIR"] = str(datasets)
    try:
        stack.start()
        up_s = time.monotonic() - started

        def job(tenant: str, job_id: str) -> dict[str, Any]:
            return dict(stack.api_retrying("GET", f"/api/v1/jobs/{job_id}", tenant))

        def adoptions(job_id: str) -> int:
            """The job's status events that say the reconciler adopted it."""
            with psycopg.connect(stack.postgres.url(RESTORED)) as db:
                query = "SELECT count(*) FROM jobs_jobevent WHERE job_id = %s AND data->>'reason' = %s"
                row = db.execute(query, (job_id, ADOPTED_REASON)).fetchone()
            return int(row[0]) if row else 0

        stack.api("POST", "/api/v1/datasets", "acme", {"name": "tiny", "content": DATASET})
        # acme's quota (4 GPUs, 2 more borrowed) runs one 4-GPU job at a time: "waiting" queues
        # behind "first" and is admitted only after the backup, when "first" is cancelled.
        first = stack.api("POST", "/api/v1/jobs", "acme", {"spec": spec("first", 4, 60)})["id"]
        waiting = stack.api("POST", "/api/v1/jobs", "acme", {"spec": spec("waiting", 4, FOREVER)})["id"]
        long = stack.api("POST", "/api/v1/jobs", "globex", {"spec": spec("long", 2, 30)})["id"]
        before = {first: "acme", waiting: "acme", long: "globex"}
        _wait(lambda: job("acme", first)["progress"]["step"] >= 1, 60, "the first job's first step")

        backup = stack.tmp / "backup"
        stack.manage("backup", str(backup), "--pg-bin", pg_bin)

        after = stack.api("POST", "/api/v1/jobs", "globex", {"spec": spec("after", 2, FOREVER)})["id"]
        stack.api("POST", f"/api/v1/jobs/{first}/cancel", "acme", {})
        _wait(lambda: job("acme", waiting)["progress"]["step"] >= 1, 90, "the waiting job to run on the engine")
        _wait(lambda: job("globex", after)["progress"]["step"] >= 1, 60, "the job created after the backup to run")

        # The database and the datasets' disk are lost; the engine runs on. The backup goes into
        # a fresh database and the control plane starts on it.
        stack.processes.stop(CONTROL_PLANE)
        with psycopg.connect(stack.postgres.url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{DATABASE}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{RESTORED}"')
        shutil.rmtree(datasets)
        stack.env["DATABASE_URL"] = stack.postgres.url(RESTORED)
        stack.manage("restore", str(backup), "--pg-bin", pg_bin)
        with psycopg.connect(stack.postgres.url(RESTORED)) as db:
            restored = {job_id: job_row(db, job_id) for job_id in [*before, after]}
        # What the backup holds: the test's premise, not its result.
        assert restored[after] is None
        assert restored[first] is not None and restored[first]["status"] in ("starting", "running")
        assert restored[waiting] == {"status": "queued", "admitted": False, "attempt": 0, "step": 0}, restored
        assert restored[long] is not None and restored[long]["status"] in ("starting", "running")

        restarted = time.monotonic()
        for name in CONTROL_PLANE:
            stack.start_process(name)
        stack.wait_healthy()
        with ThreadPoolExecutor(1) as pool:  # asking the engine takes seconds: meanwhile the jobs run
            # The job created after the backup used capacity nobody accounts for any more.
            orphan = lambda: engine_states(stack).get(after) == "cancelled"  # noqa: E731
            cancelled = pool.submit(_wait, orphan, 90, "the pipeline of the job created after the backup to stop")
            _wait(lambda: adoptions(waiting) == 1, 90, "the waiting job, which the engine runs, to be adopted")
            adopted_s = time.monotonic() - restarted
            stack.api("POST", f"/api/v1/jobs/{waiting}/cancel", "acme", {})  # the user has seen enough
            all_ended = lambda: all(job(t, j)["status"] in ENDED for j, t in before.items())  # noqa: E731
            _wait(all_ended, 120, "every restored job to end")
            cancelled.result()
        with pytest.raises(urllib.error.HTTPError, match="404"):
            stack.api("GET", f"/api/v1/jobs/{after}", "globex")
        listed = {j["id"] for t in ("acme", "globex") for j in stack.api("GET", "/api/v1/jobs", t)["results"]}
        assert set(before) <= listed and after not in listed
        assert [row["answer"] for row in stack.api("GET", "/api/v1/datasets/tiny", "acme")["preview"]] == ["4"]

        with psycopg.connect(stack.postgres.url(RESTORED)) as db:
            for job_id, tenant in before.items():
                shown = job(tenant, job_id)
                ended = "succeeded" if job_id == long else "cancelled"
                assert (shown["status"], shown["attempt"]) == (ended, 1), shown
                assert_ran_once(db, shown)
                if ended == "succeeded":
                    assert shown["progress"]["step"] == shown["progress"]["total_steps"]
        assert adoptions(waiting) == 1
        print(f"\nstack up in {up_s:.0f} s; the waiting job adopted {adopted_s:.0f} s after the restart")
    finally:
        stack.stop(timeout_s=5)  # the Ray head ignores SIGTERM for longer than that: it is killed
        shutil.rmtree(stack.tmp, ignore_errors=True)  # the private servers' data, some 40 MiB
