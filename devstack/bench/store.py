"""The run's own database, owned by a role whose connection limit holds, and its Redis keys:
made fresh at the start, deleted at the end (PostgreSQL and Redis may be shared)."""

from __future__ import annotations

import psycopg
import redis

from devstack.bench.config import BENCH_ROLE_PASSWORD


def reset_database(admin_url: str, database: str, connection_limit: int) -> None:
    """A fresh database owned by a role of its own. The role is not a superuser, so its
    connection limit holds: a run can never take every connection of a shared PostgreSQL."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'DROP ROLE IF EXISTS "{database}"')
        conn.execute(
            f'CREATE ROLE "{database}" LOGIN CONNECTION LIMIT {int(connection_limit)} '
            f"PASSWORD '{BENCH_ROLE_PASSWORD}'"
        )
        conn.execute(f'CREATE DATABASE "{database}" OWNER "{database}"')


def drop_database(admin_url: str, database: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'DROP ROLE IF EXISTS "{database}"')


def purge_redis(url: str, prefix: str) -> dict[str, int]:
    """Delete the run's keys only (Redis is shared): queued Celery tasks, channel-layer
    groups, throttle counters. Returns how many keys and queued Celery messages there were."""
    client = redis.Redis.from_url(url)
    try:
        queued = int(client.llen(prefix))
        deleted = 0
        for pattern in (f"{prefix}*", f"_kombu.binding.{prefix}*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            for start in range(0, len(keys), 500):
                deleted += int(client.delete(*keys[start : start + 500]))
        return {"keys_deleted": deleted, "celery_messages_purged": queued}
    finally:
        client.close()
