"""The embedded audit store: one SQLite file in WAL mode, created on first use.

sqlite3 blocks, so every call runs in a worker thread (`asyncio.to_thread`) on one dedicated
connection. A `threading.Lock` taken inside the worker, not an `asyncio.Lock` around the await,
guards that connection: a cancelled caller stops waiting but its thread still runs to the end,
and the next call must not use the connection meanwhile.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from gateway.audit.conform import check, json_text
from gateway.audit.migrations import (
    BOOL_COLUMNS,
    COLUMNS,
    JSON_AT,
    JSON_COLUMNS,
    MIGRATIONS,
    TABLE,
    Migration,
    migrate_sqlite,
)
from gateway.audit.record import AuditRecord
from gateway.audit.store import RecordRejected

T = TypeVar("T")

# The connection's page cache in KiB (SQLite's default is 2000, about 2 MiB resident once the
# trail outgrows it). The gateway only appends: each insert touches the right edge of the table
# and of its three indexes, four pages deep at most, and a report reads the file once; 32 pages
# of 4 KiB hold those. Measured with scripts/bench/audit_insert_growth.py to 2,000,000 records:
# 19.2-21.5 us a record at 128 KiB, 20.2-20.9 at 512 KiB, flat either way; 0.4-0.5 MiB less
# resident after a few minutes of load.
CACHE_KIB = 128

# The dashboard's reader maps the file instead of copying pages through its cache: an aggregate
# reads each page of its window once per query, several queries a page view (measured: 40% less
# time over a day of a million-record trail). A larger cache or in-memory sorts measured no faster.
READ_MMAP_BYTES = 1 << 30

# What an insert raises for a value SQLite cannot bind or a constraint the row breaks: the
# record's fault, not the file's (those are OperationalError and DatabaseError: retried).
_REFUSED = (
    sqlite3.DataError,
    sqlite3.IntegrityError,
    sqlite3.InterfaceError,
    sqlite3.ProgrammingError,
    OverflowError,
    UnicodeEncodeError,
)

_ROW_VALUES = f"({', '.join('?' for _ in COLUMNS)})"
_INSERT_INTO = f"INSERT OR IGNORE INTO {TABLE} ({', '.join(COLUMNS)}) VALUES "
# Rows per INSERT statement. One statement for many rows is one step of SQLite, so the writer
# thread gives up and takes back the GIL once per statement instead of once per row (the
# event loop holds it most of the time). Only two statements are ever prepared, this many rows
# and one (for what is left of a batch): a prepared statement of n rows holds n * 39 bound
# values and their opcodes (~3.5 KiB a row), and one per batch size would keep megabytes.
_ROWS_PER_INSERT: Final = 16
_INSERT_ONE: Final = _INSERT_INTO + _ROW_VALUES
_INSERT_MANY: Final = _INSERT_INTO + ",".join([_ROW_VALUES] * _ROWS_PER_INSERT)


_SELECT = f"SELECT {', '.join(COLUMNS)} FROM {TABLE}"

# sqlite3 adapts every value it binds that is not exactly an int, float, str or bytearray: None
# and bool too. With no adapter registered for the value's type it asks the protocol type for
# `__adapt__`, and that AttributeError is formatted and cleared, some 2,000 instructions a value
# (CPython 3.11); a record binds about twenty Nones and bools. Registered, the lookup finds them
# at once, and they bind as before: None as NULL, a bool as its int. An empty dict's `get` is a
# C function that answers None.
_NOTHING: Final[dict[None, None]] = {}
sqlite3.register_adapter(type(None), _NOTHING.get)
sqlite3.register_adapter(bool, int)


def encode(record: AuditRecord) -> tuple[Any, ...]:
    """One row in `COLUMNS` order: lists and dicts as JSON text, None as NULL (bools bind as
    0/1: sqlite3 takes them as the ints they are).

    `RecordRejected` when a field does not hold its type: SQLite would store a string in an
    INTEGER column, where PostgreSQL refuses it and `gateway audit` would fail on it later.
    """
    row = list(check(record))  # in field order, as COLUMNS are
    for at in JSON_AT:
        value = row[at]
        if value is not None:
            row[at] = "[]" if value == [] else json_text(value)
    return tuple(row)


def decode(row: Sequence[Any]) -> AuditRecord:
    values: dict[str, Any] = {}
    for name, value in zip(COLUMNS, row, strict=True):
        if value is not None and name in BOOL_COLUMNS:
            value = bool(value)
        elif value is not None and name in JSON_COLUMNS:
            value = orjson.loads(value)
        values[name] = value
    return AuditRecord(**values)


def _enable_wal(conn: sqlite3.Connection, patience: float = 30.0) -> None:
    """Switch the file to WAL (persistent, so once per file), waiting out other openers.

    Changing the journal mode answers SQLITE_BUSY at once, without the busy timeout, while
    another connection holds the file (several processes opening it together): so retry here.
    """
    deadline = time.monotonic() + patience
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


class SQLiteStore:
    """`AuditStore` on a SQLite file; `path` and its parent directory are created on open.

    The dashboard's reads (`read`) go through a second, read-only connection with a lock of its
    own: in WAL mode a reader never blocks the writer, so an aggregate over millions of records
    does not hold up the trail's inserts (their connection and lock stay the writer's alone)."""

    dialect = "sqlite"

    def __init__(self, path: str | Path, *, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{path}"
        self._migrations = migrations
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()

    async def open(self) -> None:
        await asyncio.to_thread(self._locked, self._open)

    async def write(self, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
        rows = [encode(r) for r in records]
        await asyncio.to_thread(self._opened, self._write, rows)

    async def fetch(
        self, since: float | None = None, truncated_only: bool = False, limit: int | None = None
    ) -> list[AuditRecord]:
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("started_at >= ?")
            params.append(since)
        if truncated_only:
            where.append("truncated = 1")
        sql = _SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = await asyncio.to_thread(self._opened, self._query, sql, params)
        return [decode(row) for row in rows]

    async def read(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self._read, sql, params)

    async def close(self) -> None:
        await asyncio.to_thread(self._locked, self._close)

    # --- in the worker thread, under the lock ---------------------------------------------------

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            return fn(*args)

    def _opened(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            self._open()  # first use opens, so a store works without an explicit open()
            return fn(*args)

    def _open(self) -> None:
        if self._closed:
            raise RuntimeError(f"audit store {self.url} is closed")
        if self._conn is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
        conn = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=30.0
        )
        try:
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            migrate_sqlite(conn, self._migrations)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _write(self, rows: list[tuple[Any, ...]]) -> None:
        assert self._conn is not None
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            try:
                whole = len(rows) - len(rows) % _ROWS_PER_INSERT
                for start in range(0, whole, _ROWS_PER_INSERT):
                    part = rows[start : start + _ROWS_PER_INSERT]
                    self._conn.execute(_INSERT_MANY, list(chain.from_iterable(part)))
                if whole < len(rows):
                    self._conn.executemany(_INSERT_ONE, rows[whole:])
            except _REFUSED as exc:
                raise RecordRejected(f"SQLite refused a record ({type(exc).__name__})") from exc
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def _query(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        assert self._conn is not None
        return self._conn.execute(sql, params).fetchall()

    def _read(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        with self._read_lock:
            reader = self._reader
            if reader is None:
                self._opened(lambda: None)  # the file exists, in WAL mode, at the latest schema
                uri = f"{self.path.absolute().as_uri()}?mode=ro"
                reader = self._reader = sqlite3.connect(uri, uri=True, check_same_thread=False)
                reader.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
                reader.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
            return reader.execute(sql, list(params)).fetchall()

    def _close(self) -> None:
        self._closed = True
        with self._read_lock:
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            # Fold the WAL back into the main file so the file alone is the whole trail.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
