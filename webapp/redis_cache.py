"""Django's Redis cache backend with one connection pool per process, not per request.

Django keeps a cache object per async context, so under ASGI every request built its own
``RedisCache``, its own connection pool and a fresh TCP connection to Redis, and each cache
call built a new ``redis.Redis`` around the pool. Here every cache object with the same
servers and options shares one client (``redis.Redis`` and its pool are thread-safe, and the
pool reconnects in a forked child).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_clients: dict[str, RedisCacheClient] = {}
_clients_lock = threading.Lock()


class SharedRedisCacheClient(RedisCacheClient):
    """One ``redis.Redis`` per pool, built on first use."""

    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        self._redis_clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)
        client = self._redis_clients.get(index)
        if client is None:
            client = self._client(connection_pool=self._get_connection_pool(write))
            self._redis_clients[index] = client
        return client


class SharedRedisCache(RedisCache):
    """``django.core.cache.backends.redis.RedisCache`` whose client is shared process-wide."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._ident = repr((self._servers, sorted(self._options.items())))

    @property
    def _cache(self) -> RedisCacheClient:
        client = _clients.get(self._ident)
        if client is None:
            with _clients_lock:
                client = _clients.setdefault(self._ident, SharedRedisCacheClient(self._servers, **self._options))
        return client
