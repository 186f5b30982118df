"""Shared state of one process: a dict of values with expiry times, on the event loop's thread."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

SWEEP_EVERY: Final = 60.0  # seconds between two passes that drop expired entries


class MemoryState:
    """Every operation completes without awaiting anything: the in-memory limits add no
    suspension point to an exchange. Expired entries are dropped when read, and all of them by a
    sweep at most every SWEEP_EVERY seconds, so window counters of past windows do not pile up."""

    kind = "memory"

    def __init__(self) -> None:
        self._values: dict[str, tuple[int | bytes, float]] = {}  # key -> (value, expires at)
        self._slots: dict[str, dict[str, float]] = {}  # key -> holder -> lease ends at
        self._next_sweep = time.monotonic() + SWEEP_EVERY

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        self._values.clear()

    def _live(self, key: str, now: float) -> int | bytes | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            del self._values[key]
            return None
        return entry[0]

    def _sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY
        for key in [k for k, (_, expires) in self._values.items() if expires <= now]:
            del self._values[key]

    async def incr(self, key: str, amount: int, ttl: float) -> int:
        now = time.monotonic()
        self._sweep(now)
        current = self._live(key, now)
        value = (current if isinstance(current, int) else 0) + amount
        if value <= 0:
            self._values.pop(key, None)
            return 0
        self._values[key] = (value, now + ttl)
        return value

    async def get(self, key: str) -> bytes | None:
        value = self._live(key, time.monotonic())
        if isinstance(value, int):
            return str(value).encode()
        return value

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        now = time.monotonic()
        self._sweep(now)
        self._values[key] = (value, now + ttl)

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)

    async def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        now = time.monotonic()
        slots = self._slots.setdefault(key, {})
        if len(slots) >= limit:
            for expired in [h for h, ends in slots.items() if ends <= now]:
                del slots[expired]
            if len(slots) >= limit:
                return False
        slots[holder] = now + lease
        return True

    async def release(self, key: str, holder: str) -> None:
        slots = self._slots.get(key)
        if slots is not None:
            slots.pop(holder, None)
            if not slots:
                del self._slots[key]

    async def renew(self, key: str, holders: Sequence[str], lease: float) -> None:
        slots = self._slots.get(key)
        if slots is None:
            return
        ends = time.monotonic() + lease
        for holder in holders:
            if holder in slots:
                slots[holder] = ends

    def describe(self) -> str:
        return "memory (this process only)"
