"""The cache the throttles count in: one Redis connection pool per process, not one per
request, and still working after Redis drops the pool's connections (a restart)."""

from __future__ import annotations

import threading
import uuid

import redis

from tests.django_fixtures import TEST_NAMESPACE, TEST_REDIS
from webapp.redis_cache import SharedRedisCache


def new_cache(**options: str) -> SharedRedisCache:
    """What Django builds for every request context (its cache handler is context-local)."""
    return SharedRedisCache(f"{TEST_REDIS}/6", {"KEY_PREFIX": f"{TEST_NAMESPACE}-shared-cache", "OPTIONS": options})


def test_every_request_context_shares_one_connection_pool() -> None:
    clients = []

    def one_request() -> None:
        cache = new_cache()
        cache.set("probe", 1, 5)
        clients.append(cache._cache.get_client(write=True))

    threads = [threading.Thread(target=one_request) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(clients) == 8
    assert len({id(c) for c in clients}) == 1
    assert len({id(c.connection_pool) for c in clients}) == 1


def test_the_shared_pool_reconnects_after_redis_drops_it() -> None:
    name, key = f"{TEST_NAMESPACE}-{uuid.uuid4().hex[:8]}", "probe"
    cache = new_cache(client_name=name)  # a pool of its own, whose connections can be told apart
    cache.set(key, 1, 30)
    admin = redis.Redis.from_url(f"{TEST_REDIS}/6")
    ours = [c["id"] for c in admin.client_list() if c.get("name") == name]
    assert ours
    for client_id in ours:
        admin.client_kill_filter(_id=client_id)
    assert new_cache(client_name=name).get(key) == 1
    assert cache.incr(key) == 2
    cache.delete(key)
