"""Control-plane fixtures, loaded by ``tests/conftest.py`` where Django is installed: the real
Postgres (pytest-django's test database), the real Redis (a broker and a channel layer in
their own database numbers), a real Celery worker and beat in threads of this process, and
the in-process engine."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from channels.layers import channel_layers
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test.utils import override_settings

from tenants.models import Role, Tenant
from tenants.services import api_token_create, membership_add, tenant_create
from webapp import engine_gateway

TEST_REDIS = "redis://127.0.0.1:6379"
# Two test runs on one machine (say, two checkouts) must not consume each other's tasks.
TEST_NAMESPACE = os.environ.get("JIGSAW_TEST_NAMESPACE", "jigsaw-test")


@pytest.fixture(scope="session", autouse=True)
def isolated_redis() -> Iterator[None]:
    """Tests use Redis databases 5 (broker) and 6 (channel layer), never the demo's."""
    from webapp.celery_app import app

    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"{TEST_REDIS}/6"], "prefix": TEST_NAMESPACE},
        }
    }
    settings.REDIS_URL = f"{TEST_REDIS}/6"
    channel_layers.backends.clear()
    # Test users need no slow password hash (each actor cost up to a second).
    override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]).enable()
    # Throttle counters too (override_settings resets Django's cache handlers).
    override_settings(
        CACHES={
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": f"{TEST_REDIS}/6",
                "KEY_PREFIX": TEST_NAMESPACE,
            }
        }
    ).enable()
    # Worker threads must not keep connections open past a test (the test database is dropped).
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    app.conf.broker_url = f"{TEST_REDIS}/5"
    app.conf.task_default_queue = TEST_NAMESPACE
    yield


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Before the test database is dropped, end sessions that server and worker threads left
    open on it (Django closes connections per thread; those threads are gone)."""
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture()
def engine_speed() -> Iterator[Any]:
    """Set the simulated engine's speed for one test (a fresh in-process engine)."""

    def set_speed(speed: float) -> None:
        settings.ENGINE_SPEED = speed
        engine_gateway.reset_engine_host()

    set_speed(math.inf)
    yield set_speed
    engine_gateway.reset_engine_host()


@pytest.fixture()
def celery_worker_thread(isolated_redis: None, transactional_db: None) -> Iterator[None]:
    """A real Celery worker consuming the test queue, plus beat (the event pump) every second."""
    with in_thread_worker():
        yield


@contextlib.contextmanager
def in_thread_worker(*, beat: bool = True) -> Iterator[None]:
    """A solo Celery worker in a thread of this process, and beat in another unless not asked.

    The calling thread's database connections are handed back first. A solo pool sends
    ``worker_process_init`` from the thread that builds the worker, and Celery's Django fixup
    answers it as a freshly forked child would: it closes the file descriptor under each of that
    thread's open connections, then returns them to the process's connection pool. The pool
    then holds a connection whose descriptor number the next socket reuses, and a health check
    on it writes to that socket and waits forever for PostgreSQL's answer.
    """
    from celery.beat import EmbeddedService
    from celery.contrib.testing.worker import start_worker
    from django.db import connections

    from webapp.celery_app import app

    connections.close_all()
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(TEST_NAMESPACE)
    with start_worker(
        app, pool="solo", concurrency=1, perform_ping_check=False, loglevel="WARNING", shutdown_timeout=30
    ):
        if not beat:
            yield
            return
        service = EmbeddedService(app, thread=True, schedule_filename=tempfile.mktemp(prefix="beat-"))
        service.start()
        try:
            yield
        finally:
            service.stop()
            service.join(timeout=5)


@dataclass
class TenantActor:
    tenant: Tenant
    user: Any
    token: str


def _make_actor(slug: str, scopes: tuple[str, ...] = ("jobs:read", "jobs:write")) -> TenantActor:
    user = get_user_model().objects.create_user(username=f"{slug}-owner", password="pw-" + slug * 3)
    tenant = tenant_create(
        slug=slug,
        name=slug.title(),
        quota={"max_gpus_per_job": 8, "max_queued_jobs": 5, "guaranteed_gpus": {"h100": 4}, "borrow_limit_gpus": 4},
    )
    membership_add(tenant=tenant, user=user, role=Role.OWNER)
    _, raw = api_token_create(tenant=tenant, user=user, name="ci", scopes=scopes)
    return TenantActor(tenant, user, raw)


@pytest.fixture()
def make_actor() -> Any:
    return _make_actor
