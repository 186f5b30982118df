"""Which store a `responses.store` URL names; each store's module is imported only when named."""

from __future__ import annotations

from gateway.responses_store.base import SHARED_MEMORY, OffStore, ResponseStore


def open_response_store(url: str, ttl: float, max_entries: int, max_bytes: int) -> ResponseStore:
    # Each store's module is imported when asked for: sqlite3 only for a SQLite store.
    if url == "off":
        return OffStore()
    if url == "memory":
        from gateway.responses_store.memory import MemoryStore

        return MemoryStore(ttl, max_entries, max_bytes)
    if url.startswith("sqlite:///"):
        from gateway.responses_store.sqlite import SQLiteResponseStore

        return SQLiteResponseStore(url.removeprefix("sqlite:///"), ttl)
    if url.startswith(SHARED_MEMORY):  # never from a file: gateway.workers sets it
        from gateway.responses_store.sqlite import SQLiteResponseStore

        bounds = (max_entries, max_bytes)
        return SQLiteResponseStore(url.removeprefix(SHARED_MEMORY), ttl, bounds=bounds)
    raise ValueError('responses.store must be "memory", "off" or a sqlite:/// URL')
