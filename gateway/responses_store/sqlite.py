"""An opt-in store in a SQLite file, for operators who want chains to outlive a restart; also the
store several workers share in place of `memory` (gateway.workers), then held to the memory
store's bounds (`bounds`: entries and bytes, the oldest answers going first), as it takes the
place of memory (a temporary directory is often RAM). Every call runs in a worker thread: the
event loop never waits on the disk."""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
import time

import orjson

from gateway.responses_store.base import StoredResponse, human_duration

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY, parent_id TEXT, owner TEXT NOT NULL, created_at REAL NOT NULL,
        expires_at REAL NOT NULL, model TEXT NOT NULL, items_in BLOB NOT NULL,
        items_out BLOB NOT NULL, response BLOB NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires_at)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
)
PURGE_EVERY = 60.0
TRIM_EVERY = 100  # puts between two trims of a bounded store (and at least every PURGE_EVERY)
# Every entry past the newest `max_entries`, or past the newest `max_bytes` (counted as
# StoredResponse.size counts them: the input items and the response object).
TRIM = """DELETE FROM responses WHERE id IN (
    SELECT id FROM (
        SELECT id, ROW_NUMBER() OVER newest AS n,
            SUM(length(items_in) + length(response)) OVER newest AS total
        FROM responses
        WINDOW newest AS (ORDER BY created_at DESC, id DESC ROWS UNBOUNDED PRECEDING)
    ) WHERE n > ? OR total > ?)"""


class SQLiteResponseStore:
    kind = "sqlite"

    def __init__(self, path: str, ttl: float, bounds: tuple[int, int] | None = None) -> None:
        self.path = path  # made absolute where the disk may be touched (not on the loop)
        self.ttl = ttl
        self.bounds = bounds  # (max_entries, max_bytes), or None: only the ttl
        self.secret = b""
        self._db: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()
        self._purged = 0.0
        self._puts = 0  # since the last purge

    async def open(self) -> None:
        self.secret = await asyncio.to_thread(self._open)

    def _open(self) -> bytes:
        self.path = os.path.abspath(self.path)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        for statement in SCHEMA:
            db.execute(statement)
        # Kept in the file: owners stay valid across restarts. The first process to open the file
        # writes it; workers opening it together all read that one.
        fresh = secrets.token_bytes(32)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('owner_secret', ?)", (fresh,))
        row = db.execute("SELECT value FROM meta WHERE key = 'owner_secret'").fetchone()
        self._db = db
        return bytes(row[0])

    async def _run(self, statement: str, args: tuple[object, ...]) -> list[tuple[object, ...]]:
        assert self._db is not None, "open() first"
        db = self._db
        async with self._lock:
            return await asyncio.to_thread(lambda: db.execute(statement, args).fetchall())

    async def put(self, entry: StoredResponse) -> None:
        row = (
            entry.id,
            entry.parent_id,
            entry.owner,
            entry.created_at,
            entry.expires_at,
            entry.model,
            orjson.dumps(entry.items_in),
            orjson.dumps(entry.items_out),
            orjson.dumps(entry.response),
        )
        await self._run("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?,?)", row)
        now = time.time()
        self._puts += 1
        trim_due = self.bounds is not None and self._puts >= TRIM_EVERY
        if now - self._purged > PURGE_EVERY or trim_due:
            self._purged, self._puts = now, 0
            await self._run("DELETE FROM responses WHERE expires_at <= ?", (now,))
            if self.bounds is not None:
                await self._run(TRIM, self.bounds)

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        rows = await self._run(
            "SELECT id, parent_id, owner, created_at, expires_at, model, items_in, items_out,"
            " response FROM responses WHERE id = ? AND owner = ? AND expires_at > ?",
            (response_id, owner, time.time()),
        )
        if not rows:
            return None
        r = rows[0]
        return StoredResponse(
            str(r[0]),
            None if r[1] is None else str(r[1]),
            str(r[2]),
            float(r[3]),  # type: ignore[arg-type]
            float(r[4]),  # type: ignore[arg-type]
            str(r[5]),
            orjson.loads(r[6]),  # type: ignore[arg-type]
            orjson.loads(r[7]),  # type: ignore[arg-type]
            orjson.loads(r[8]),  # type: ignore[arg-type]
        )

    async def delete(self, response_id: str, owner: str) -> bool:
        found = await self.get(response_id, owner)
        if found is None:
            return False
        await self._run("DELETE FROM responses WHERE id = ? AND owner = ?", (response_id, owner))
        return True

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await asyncio.to_thread(db.close)

    def describe(self) -> str:
        ttl = human_duration(self.ttl)
        return f"{os.path.abspath(self.path)} (SQLite, ttl {ttl}; holds prompts and answers)"
