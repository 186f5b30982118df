"""The default store: in this process's memory, bounded by count, bytes and time."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict

from gateway.responses_store.base import StoredResponse, human_duration, human_size


class MemoryStore:
    kind = "memory"

    def __init__(self, ttl: float, max_entries: int, max_bytes: int) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.secret = secrets.token_bytes(32)  # owners are valid for this process only
        self._entries: OrderedDict[str, tuple[StoredResponse, int]] = OrderedDict()
        self._bytes = 0

    async def open(self) -> None:
        return None

    async def put(self, entry: StoredResponse) -> None:
        self._drop(entry.id)
        size = entry.size
        self._entries[entry.id] = (entry, size)
        self._bytes += size
        while self._entries and (
            len(self._entries) > self.max_entries or self._bytes > self.max_bytes
        ):
            self._drop(next(iter(self._entries)))  # the least recently used goes first

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        held = self._entries.get(response_id)
        if held is None:
            return None
        entry = held[0]
        if entry.expires_at <= time.time():
            self._drop(response_id)
            return None
        if entry.owner != owner:
            return None
        self._entries.move_to_end(response_id)
        return entry

    async def delete(self, response_id: str, owner: str) -> bool:
        entry = await self.get(response_id, owner)
        if entry is None:
            return False
        self._drop(response_id)
        return True

    def _drop(self, response_id: str) -> None:
        held = self._entries.pop(response_id, None)
        if held is not None:
            self._bytes -= held[1]

    async def close(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def describe(self) -> str:
        size = human_size(self.max_bytes)
        bound = f"at most {self.max_entries} responses / {size}"
        return f"memory, ttl {human_duration(self.ttl)}, {bound} (lost at exit)"
