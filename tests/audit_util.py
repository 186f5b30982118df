"""Shared audit-store test kit: one `Backend` per store kind, sample records, a scriptable store.

SQLite runs in `tmp_path`. PostgreSQL runs against `GATEWAY_TEST_POSTGRES_URL` (set by sourcing
.ci/postgres.sh), each test in a fresh schema chosen through the URL's `search_path` parameter and
dropped afterwards, so tests never see each other's rows. Without that variable the PostgreSQL
cases are skipped, except under CI=true, where they fail: CI must run them.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from gateway.audit.migrations import MIGRATIONS, Migration
from gateway.audit.postgres_store import PostgresStore
from gateway.audit.record import AuditRecord
from gateway.audit.sqlite_store import SQLiteStore
from gateway.audit.store import AuditStore
from tests.conftest import skip_without

PG_ENV = "GATEWAY_TEST_POSTGRES_URL"
BACKENDS = ("sqlite", "postgresql")
T0 = 1_700_000_000.25  # a fixed start time; records are spaced from it


def postgres_url() -> str:
    """The test server's URL, or skip (fail under CI=true) when none is configured."""
    url = os.environ.get(PG_ENV)
    if url:
        return url
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {PG_ENV} is not set: .ci/run must `source .ci/postgres.sh`")
    skip_without("postgres", f"{PG_ENV} is not set")


def with_search_path(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"


@dataclass
class Backend:
    """One store location, and raw access to it that bypasses the store under test."""

    kind: str  # "sqlite" | "postgresql"
    url: str  # the store URL, for open_store or a gateway config
    path: Path | None = None  # SQLite file
    opened: list[AuditStore] = field(default_factory=list)

    def store(self, migrations: Sequence[Migration] = MIGRATIONS) -> AuditStore:
        store: AuditStore
        if self.kind == "sqlite":
            assert self.path is not None
            store = SQLiteStore(self.path, migrations=migrations)
        else:
            store = PostgresStore(self.url, migrations=migrations)
        self.opened.append(store)
        return store

    async def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            assert self.path is not None
            return await asyncio.to_thread(_sqlite_rows, self.path, sql)
        conn = await asyncpg.connect(self.url)
        try:
            return [tuple(r) for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    async def versions(self) -> list[int]:
        return [v for (v,) in await self.rows("SELECT version FROM schema_version ORDER BY 1")]

    async def count(self) -> int:
        return (await self.rows("SELECT COUNT(*) FROM audit_records"))[0][0]

    async def columns(self, table: str = "audit_records") -> list[str]:
        if self.kind == "sqlite":
            return [r[1] for r in await self.rows(f"PRAGMA table_info({table})")]
        return [
            r[0]
            for r in await self.rows(
                "SELECT column_name FROM information_schema.columns "
                f"WHERE table_schema = current_schema() AND table_name = '{table}' "
                "ORDER BY ordinal_position"
            )
        ]


def _sqlite_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@asynccontextmanager
async def open_backend(kind: str, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh, empty store location of `kind`; stores made from it are closed afterwards."""
    if kind == "sqlite":
        path = tmp_path / "audit" / "audit.db"
        backend = Backend(kind, f"sqlite:///{path}", path=path)
        try:
            yield backend
        finally:
            for store in backend.opened:
                await store.close()
        return
    base = postgres_url()
    schema = f"audit_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(base)
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        backend = Backend(kind, with_search_path(base, schema))
        try:
            yield backend
        finally:
            for store in backend.opened:
                await store.close()
            await admin.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        await admin.close()


def full_record(i: int, **overrides: Any) -> AuditRecord:
    """A record with every field set to a non-default value, distinct per `i`."""
    values: dict[str, Any] = {
        "id": f"req-{i:05d}",
        "started_at": T0 + i,
        "client_format": "anthropic" if i % 2 else "openai",
        "stream": True,
        "model": f"client-model-{i}",
        "route": "claude-*",
        "provider": "anthropic" if i % 2 else "openai",
        "upstream_model": f"upstream-model-{i}",
        "first_byte_at": T0 + i + 0.125,
        "ended_at": T0 + i + 1.5,
        "http_status": 200,
        "stop_reason": "max_tokens",
        "native_stop_reason": "length",
        "truncated": True,
        "cut_reason": "length",
        "terminator_seen": False,
        "tool_calls": 3,
        "withheld_tool_calls": [{"id": f"call_{i}", "name": "get_weather"}],
        "parse_failures": [{"error_class": "JSONDecodeError", "offset": 17, "length": 40}],
        "input_tokens": 1234,
        "output_tokens": 4096,
        "cache_read_tokens": 100,
        "cache_creation_tokens": 7,
        "error_class": "UpstreamError",
        "client_aborted": True,
        "runaway_streak": 5,
        "content": {"messages": [{"role": "user", "text": "héllo ✓"}], "n": 1, "ok": None},
        "ended_by": "server",
        "dropped_fields": ["response_format", "seed"],
        "dropped_tools": 2,
        "dropped_input_items": 3,
        "response_id": f"resp_{i:032x}",
        "previous_response_id": f"resp_{i + 1000:032x}",
        "attempts": [
            {
                "provider": "openai",
                "upstream_model": "m",
                "outcome": "status_503",
                "duration_ms": 12.5,
                "status": 503,
            },
            {
                "provider": "anthropic",
                "upstream_model": "n",
                "outcome": "answered",
                "duration_ms": 40.25,
                "status": 200,
            },
        ],
        "timeout": "idle",
        "key_name": f"team-{i}",
        "cost_usd": 0.0125 + i / 1024,
        "cost_source": "table",
    }
    values.update(overrides)
    return AuditRecord(**values)


def sparse_record(i: int, **overrides: Any) -> AuditRecord:
    """Only the required fields: every optional field None, lists empty, bools False."""
    return AuditRecord(
        id=f"sparse-{i:05d}",
        started_at=T0 + i,
        client_format="openai",
        stream=False,
        **overrides,
    )


class FakeStore:
    """An in-memory `AuditStore` whose writes can be slowed, held or made to fail."""

    url = "fake://"

    def __init__(self, *, fail_times: int = 0, fail_forever: bool = False) -> None:
        self.records: list[AuditRecord] = []
        self.batches: list[int] = []  # size of each successful write
        self.attempts = 0
        self.fail_times = fail_times
        self.fail_forever = fail_forever
        self.gate = asyncio.Event()
        self.gate.set()  # clear() to hold writes until set() again
        self.write_started = asyncio.Event()
        self.closed = False

    async def open(self) -> None:
        pass

    async def write(self, records: Sequence[AuditRecord]) -> None:
        self.attempts += 1
        self.write_started.set()
        await self.gate.wait()
        if self.fail_forever or self.attempts <= self.fail_times:
            raise FlakyStoreError(f"SECRET-in-message {records[0].id}")
        self.records.extend(records)
        self.batches.append(len(records))

    async def fetch(
        self, since: float | None = None, truncated_only: bool = False, limit: int | None = None
    ) -> list[AuditRecord]:
        return list(reversed(self.records))

    async def close(self) -> None:
        self.closed = True


class FlakyStoreError(Exception):
    pass
