"""A prefork Celery worker keeps its database connection pool between tasks.

Celery's Django fixup closed a prefork pool process's connection pool before and after every
task, so each task opened the pool's minimum of PostgreSQL sessions again (about five). The
tests' own worker runs in a thread of the test process and must keep Celery's default handling.
"""

from __future__ import annotations

import json
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


def _taken_not_done(broker: redis.Redis, queue: str) -> int:
    """Tasks of ``queue`` a worker took but has not acknowledged (tasks ack late here)."""
    return sum(json.loads(entry)[2] == queue for entry in broker.hvals("unacked"))


def _wait_until_drained(
    worker: subprocess.Popen[bytes], broker: redis.Redis, queue: str, timeout_s: float = 90.0
) -> None:
    """Until the queue is empty and the worker has acknowledged every task it took."""
    deadline = time.monotonic() + timeout_s
    while broker.llen(queue) or _taken_not_done(broker, queue):
        assert worker.poll() is None, "the worker exited"
        assert time.monotonic() < deadline, f"tasks still queued after {timeout_s:.0f} s"
        time.sleep(0.2)


def _flushed_sessions(db_name: str, settle_s: float = 2.0) -> int:
    # A backend reports its session to the statistics when it ends or every ~1 s while idle.
    time.sleep(settle_s)
    return _sessions_opened(db_name)


@pytest.mark.slow
def test_tasks_reuse_the_prefork_worker_s_database_connections() -> None:
    from webapp.celery_app import app

    db_name = connection.settings_dict["NAME"]
    redis_db = f"{TEST_REDIS}/8"  # no other test uses it
    queue = f"prefork-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{db_name}",
        "CELERY_BROKER_URL": redis_db,
        "CELERY_QUEUE": queue,
    }
    command = [sys.executable, "-m", "celery", "-A", "webapp.celery_app", "worker", "--pool", "prefork"]
    command += ["--concurrency", "1", "--queues", queue, "--without-gossip", "--without-mingle", "-l", "WARNING"]
    worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    broker = redis.Redis.from_url(redis_db)
    sender = app.connection_for_write(redis_db)
    try:
        app.send_task("jobs.admission_tick", queue=queue, connection=sender)  # the pool opens on the first task
        _wait_until_drained(worker, broker, queue)
        before = _flushed_sessions(db_name)
        for _ in range(TASKS):
            app.send_task("jobs.admission_tick", queue=queue, connection=sender)
        _wait_until_drained(worker, broker, queue)
        opened = _flushed_sessions(db_name) - before
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        broker.delete(queue)
        broker.close()
        sender.release()
    # Before, every task closed the pool: about 5 x TASKS sessions.
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


def test_the_tests_worker_leaves_the_connection_pool_whole(isolated_redis: None) -> None:
    # Once a worker in this process kept its pool (the first one started), the next one's start
    # no longer closed the starting thread's connection: Celery's fixup closed the descriptor
    # under it instead and handed it back to the pool, and the next health check on it hung.
    from tests.django_fixtures import in_thread_worker

    for _ in range(2):
        connection.ensure_connection()
        descriptor = connection.connection.fileno()
        socket_inode = os.fstat(descriptor).st_ino
        with in_thread_worker():
            assert os.fstat(descriptor).st_ino == socket_inode, "the connection's socket was closed under it"
