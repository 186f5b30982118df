"""Shared state in Redis (`[state] redis = "redis://..."`), for replicas that share limits.

Each counter update is one Lua script (INCRBY, then PEXPIRE, or DEL when the value drops to 0 or
below), so concurrent replicas never lose an update and a counter never outlives its TTL. Every
operation is bounded by `timeout` (connect and read) and not retried: a limit check that waits
on a dead Redis would stall every request, so failures surface at once as StateUnavailable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.state.base import StateUnavailable

INCR: Final = """
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if value <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return value
"""


# Slots are a sorted set per key: holder -> when its lease ends, in Redis's own clock (TIME), so
# replicas with skewed clocks agree on which leases ran out.
NOW_MS: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""
ACQUIRE: Final = (
    NOW_MS
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
)
RENEW: Final = (
    NOW_MS
    + """
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[i])
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], lease)
end
return 0
"""
)


class RedisState:
    kind = "redis"

    def __init__(self, url: str, *, prefix: str, timeout: float) -> None:
        self._url = url
        self._prefix = prefix
        self._timeout = timeout
        self._client: aioredis.Redis | None = None
        self._incr: Any = None
        self._acquire: Any = None
        self._renew: Any = None

    async def open(self) -> None:
        """Creates the client (it connects on first use: the gateway starts while Redis is
        down, and its limits fail open until it is back)."""
        self._client = aioredis.Redis.from_url(
            self._url,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout,
            retry=Retry(NoBackoff(), 0),
        )
        self._incr = self._client.register_script(INCR)
        self._acquire = self._client.register_script(ACQUIRE)
        self._renew = self._client.register_script(RENEW)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            raise StateUnavailable("redis: not open")
        return self._client

    async def _run(self, operation: Any) -> Any:
        try:
            return await asyncio.wait_for(operation, self._timeout)
        except (RedisError, OSError, TimeoutError) as exc:
            # The class only: redis-py's messages can quote the host, the URL or a reply.
            raise StateUnavailable(f"redis: {type(exc).__name__}") from exc

    async def incr(self, key: str, amount: int, ttl: float) -> int:
        self._redis()
        value = await self._run(self._incr(keys=[self._prefix + key], args=[amount, _ms(ttl)]))
        return int(value)

    async def get(self, key: str) -> bytes | None:
        value = await self._run(self._redis().get(self._prefix + key))
        return value if value is None else bytes(value)

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        await self._run(self._redis().set(self._prefix + key, value, px=_ms(ttl)))

    async def delete(self, key: str) -> None:
        await self._run(self._redis().delete(self._prefix + key))

    async def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        self._redis()
        args = [holder, limit, _ms(lease)]
        return bool(await self._run(self._acquire(keys=[self._prefix + key], args=args)))

    async def release(self, key: str, holder: str) -> None:
        await self._run(self._redis().zrem(self._prefix + key, holder))

    async def renew(self, key: str, holders: Sequence[str], lease: float) -> None:
        self._redis()
        if holders:
            args = [_ms(lease), *holders]
            await self._run(self._renew(keys=[self._prefix + key], args=args))

    def describe(self) -> str:
        return f"redis at {redis_location(self._url)}, shared by the replicas that use it"


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def redis_location(url: str) -> str:
    """Host and port (or the socket path) of a Redis URL: never its password, user or query."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix socket {parts.path}"
    host = parts.hostname or "localhost"
    try:
        port = parts.port or 6379
    except ValueError:
        port = 6379
    tls = " (TLS)" if parts.scheme == "rediss" else ""
    return f"{host}:{port}{tls}"
