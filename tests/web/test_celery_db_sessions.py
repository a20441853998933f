"""A prefork Celery worker keeps its connection pool between tasks.

Celery's Django fixup closed a prefork child's pool before and after every task, so each task
opened five new PostgreSQL sessions (the pool's minimum of four, and one more): about 67 a
second in the control-plane soak, each a backend process forked and authenticated.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.db import connection

from tests.django_fixtures import TEST_REDIS

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)

TASKS = 40


def _sessions_opened(db_name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", [db_name])
        return int(cursor.fetchone()[0])


def _wait_idle(worker: subprocess.Popen[bytes], broker: redis.Redis, queue: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while broker.llen(queue):  # then at most the prefetched task is left: milliseconds
        assert worker.poll() is None, "the worker exited"
        assert time.monotonic() < deadline, f"tasks still queued after {timeout_s:.0f} s"
        time.sleep(0.2)


@pytest.mark.slow
def test_tasks_reuse_the_worker_s_database_connections() -> None:
    from webapp.celery_app import app

    db_name = connection.settings_dict["NAME"]
    queue = f"prefork-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{db_name}",
        "CELERY_BROKER_URL": f"{TEST_REDIS}/5",
        "CELERY_QUEUE": queue,
    }
    command = [sys.executable, "-m", "celery", "-A", "webapp.celery_app", "worker", "--pool", "prefork"]
    command += ["--concurrency", "1", "--queues", queue, "--without-gossip", "--without-mingle", "-l", "WARNING"]
    worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    broker = redis.Redis.from_url(f"{TEST_REDIS}/5")
    try:
        app.send_task("jobs.admission_tick", queue=queue)  # the pool opens on the first task
        _wait_idle(worker, broker, queue)
        time.sleep(2.0)  # the first task's sessions reach the statistics
        before = _sessions_opened(db_name)
        for _ in range(TASKS):
            app.send_task("jobs.admission_tick", queue=queue)
        _wait_idle(worker, broker, queue)
        time.sleep(2.0)
        opened = _sessions_opened(db_name) - before
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        broker.delete(queue)
        broker.close()
    assert opened <= 2, f"{TASKS} tasks opened {opened} database sessions"


def test_an_eager_task_leaves_its_caller_s_transaction_alone() -> None:
    # Standalone mode runs tasks eagerly, inside the caller: handing the connection back there
    # would close it in the middle of the caller's transaction.
    from django.db import transaction

    from tenants.models import Tenant
    from webapp.celery_app import app
    from webapp.jobs import tasks

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with transaction.atomic():
            Tenant.objects.count()
            tasks.admission_tick.delay()
            assert not connection.closed_in_transaction
            Tenant.objects.count()
    finally:
        app.conf.task_always_eager = eager
