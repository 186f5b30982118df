"""Counters and values shared by the gateway's replicas: in memory, or in Redis.

The access limits (gateway.access.limits) count through this protocol, so replicas sharing one
Redis (`[state] redis = "redis://..."`) share their rate limits, token budgets and per-key
concurrency; without Redis each process counts alone. Other stateful features (a circuit
breaker) can keep their state here too, with `get` / `set` and a TTL.

    state = open_state(settings.state)         # MemoryState, or RedisState for [state] redis
    await state.open()
    used = await state.incr("tokens:team-a:29512345", 120, ttl=60.0)
    if await state.acquire("slots:team-a", request_id, limit=4, lease=30.0): ...
    await state.set("breaker:openai", b"open", ttl=30.0)
    await state.close()

Every operation may raise `StateUnavailable` (Redis down, or slower than `[state] timeout`);
callers decide how to fail (the limits fail open).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gateway.settings import StateSettings
from gateway.state.base import StateUnavailable
from gateway.state.memory import MemoryState


class SharedState(Protocol):
    kind: str  # "memory" | "redis"

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def incr(self, key: str, amount: int, ttl: float) -> int:
        """Add `amount` (may be negative) to the integer at `key` (0 when missing or expired)
        and return the new value, atomically; the key then expires `ttl` seconds later. A value
        that would drop to 0 or below is deleted and 0 is returned."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The value at `key`, None when missing or expired (an `incr` counter as its digits)."""
        ...

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        """Store `value` at `key` for `ttl` seconds."""
        ...

    async def delete(self, key: str) -> None: ...

    async def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        """Take one of `limit` slots at `key` for `holder`, for `lease` seconds: False when all
        are taken. Slots whose lease ran out (a replica that died holding them) are free again."""
        ...

    async def release(self, key: str, holder: str) -> None:
        """Give `holder`'s slot back (nothing when it holds none)."""
        ...

    async def renew(self, key: str, holders: Sequence[str], lease: float) -> None:
        """Extend the leases `holders` still have at `key` to `lease` seconds from now."""
        ...

    def describe(self) -> str:
        """Where the state lives, for the startup report (never a password)."""
        ...


def open_state(settings: StateSettings) -> SharedState:
    """The state `[state]` configures; constructing it connects to nothing."""
    if settings.redis is None:
        return MemoryState()
    from gateway.state.redis_state import RedisState  # the redis package only when asked for

    return RedisState(settings.redis, prefix=settings.prefix, timeout=settings.timeout)


__all__ = ["MemoryState", "SharedState", "StateUnavailable", "open_state"]
