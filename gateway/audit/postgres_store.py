"""The shared audit store: PostgreSQL through asyncpg, for several gateway replicas on one trail.

A small pool (1 to 4 connections) is plenty: writes arrive in batches from one background writer
per replica. Inserts use `ON CONFLICT (id) DO NOTHING`, so a batch retried after a lost reply is
harmless. JSON fields travel as text with an explicit `::jsonb` cast and come back as text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson

from gateway.audit.conform import check, json_text
from gateway.audit.migrations import (
    COLUMNS,
    JSON_AT,
    JSON_COLUMNS,
    MIGRATIONS,
    TABLE,
    Migration,
    migrate_postgresql,
)
from gateway.audit.record import AuditRecord
from gateway.audit.store import RecordRejected, redact_url

_PLACEHOLDERS = ", ".join(
    f"${i}::jsonb" if name in JSON_COLUMNS else f"${i}" for i, name in enumerate(COLUMNS, start=1)
)
_INSERT = (
    f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({_PLACEHOLDERS}) "
    "ON CONFLICT (id) DO NOTHING"
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM {TABLE}"


def encode(record: AuditRecord) -> tuple[Any, ...]:
    """One row in `COLUMNS` order; JSON fields as text, None as NULL. `RecordRejected` when a
    field does not hold its type (so both stores refuse the same records)."""
    row = list(check(record))  # in field order, as COLUMNS are
    for at in JSON_AT:
        if row[at] is not None:
            row[at] = json_text(row[at])
    return tuple(row)


def decode(row: asyncpg.Record) -> AuditRecord:
    values: dict[str, Any] = {}
    for name in COLUMNS:
        value = row[name]
        if value is not None and name in JSON_COLUMNS:
            value = orjson.loads(value)
        values[name] = value
    return AuditRecord(**values)


class PostgresStore:
    """`AuditStore` on PostgreSQL. `url` is kept without its password; the DSN stays private."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        migrations: Sequence[Migration] = MIGRATIONS,
        min_size: int = 1,
        max_size: int = 4,
    ) -> None:
        self.url = redact_url(url)
        self._dsn = url
        self._migrations = migrations
        self._min_size = min_size
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False

    async def open(self) -> None:
        async with self._open_lock:
            if self._closed:
                raise RuntimeError(f"audit store {self.url} is closed")
            if self._pool is not None:
                return
            pool = await asyncpg.create_pool(
                dsn=self._dsn, min_size=self._min_size, max_size=self._max_size
            )
            try:
                async with pool.acquire() as conn:
                    await migrate_postgresql(conn, self._migrations)
            except BaseException:
                await pool.close()
                raise
            self._pool = pool

    async def _ready(self) -> asyncpg.Pool:
        if self._pool is None:
            await self.open()  # first use opens, so a store works without an explicit open()
        assert self._pool is not None
        return self._pool

    async def write(self, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
        rows = [encode(r) for r in records]
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            try:
                await conn.executemany(_INSERT, rows)
            except (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError) as exc:
                # SQLSTATE classes 22 and 23, and asyncpg's own encoding errors (a DataError):
                # the row's fault. Connection and server failures propagate, to be retried.
                raise RecordRejected(f"PostgreSQL refused a record ({type(exc).__name__})") from exc

    async def fetch(
        self, since: float | None = None, truncated_only: bool = False, limit: int | None = None
    ) -> list[AuditRecord]:
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            params.append(float(since))
            where.append(f"started_at >= ${len(params)}")
        if truncated_only:
            where.append("truncated")
        sql = _SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += ' ORDER BY started_at DESC, id COLLATE "C" DESC'  # ties: byte order, as SQLite
        if limit is not None:
            params.append(limit)
            sql += f" LIMIT ${len(params)}"
        pool = await self._ready()
        async with pool.acquire() as conn:
            rows = await conn.fetch(sql, *params)
        return [decode(row) for row in rows]

    async def read(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        pool = await self._ready()
        async with pool.acquire() as conn:
            rows = await conn.fetch(sql, *params)
        return [tuple(row) for row in rows]

    async def close(self) -> None:
        async with self._open_lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
