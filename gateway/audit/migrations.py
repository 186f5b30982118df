"""The audit schema, versioned: numbered migrations applied in order, recorded in `schema_version`.

Each migration holds its statements for both dialects ("sqlite", "postgresql"). A database is at
the highest version recorded in `schema_version`; opening a store applies the missing migrations
in one transaction, so a failed migration leaves the database at its previous version.

To change the schema, append a new `Migration(N + 1, ...)` to `MIGRATIONS` (never edit one that
has shipped) and extend `COLUMNS` when it adds a column: the stores insert and read exactly
`COLUMNS`, and a test checks that the migrated table and `AuditRecord` agree with it.

`migrate_sqlite` and `migrate_postgresql` take the migration list as a parameter so tests can run
a longer, test-only list against a database created at an older version.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # each store imports its own driver: PostgreSQL's trail never loads SQLite
    import sqlite3

    import asyncpg

log = logging.getLogger("gateway.audit")

DIALECTS = ("sqlite", "postgresql")
TABLE = "audit_records"

# Columns holding a bool (INTEGER 0/1 in SQLite, BOOLEAN in PostgreSQL) and JSON (TEXT / JSONB).
BOOL_COLUMNS = frozenset({"stream", "truncated", "terminator_seen", "client_aborted"})
JSON_COLUMNS = frozenset(
    {"withheld_tool_calls", "parse_failures", "content", "dropped_fields", "attempts", "recovered"}
)

# The table's columns at the latest version, in insert order; one per `AuditRecord` field.
COLUMNS: tuple[str, ...] = (
    "id",
    "started_at",
    "client_format",
    "stream",
    "model",
    "route",
    "provider",
    "upstream_model",
    "first_byte_at",
    "ended_at",
    "http_status",
    "stop_reason",
    "native_stop_reason",
    "truncated",
    "cut_reason",
    "terminator_seen",
    "tool_calls",
    "withheld_tool_calls",
    "parse_failures",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "error_class",
    "client_aborted",
    "runaway_streak",
    "content",
    "ended_by",
    "dropped_fields",
    "dropped_tools",
    "dropped_input_items",
    "response_id",
    "previous_response_id",
    "attempts",
    "timeout",
    "key_name",
    "cost_usd",
    "cost_source",
    "operation",
    "recovered",
    "estimated_tokens",
)
# Where the JSON columns sit in a row in COLUMNS' order (the stores encode them as text).
JSON_AT: tuple[int, ...] = tuple(at for at, name in enumerate(COLUMNS) if name in JSON_COLUMNS)


class Migration(NamedTuple):
    version: int
    description: str
    statements: Mapping[str, Sequence[str]]  # dialect -> statements, run in order


def _audit_records_v1(dialect: str) -> list[str]:
    pg = dialect == "postgresql"
    real = "DOUBLE PRECISION" if pg else "REAL"
    boolean = "BOOLEAN" if pg else "INTEGER"
    json = "JSONB" if pg else "TEXT"
    big = "BIGINT" if pg else "INTEGER"
    false = "FALSE" if pg else "0"
    return [
        f"""CREATE TABLE {TABLE} (
            id TEXT PRIMARY KEY,
            started_at {real} NOT NULL,
            client_format TEXT NOT NULL,
            stream {boolean} NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            route TEXT,
            provider TEXT,
            upstream_model TEXT,
            first_byte_at {real},
            ended_at {real},
            http_status INTEGER,
            stop_reason TEXT,
            native_stop_reason TEXT,
            truncated {boolean} NOT NULL DEFAULT {false},
            cut_reason TEXT,
            terminator_seen {boolean},
            tool_calls INTEGER NOT NULL DEFAULT 0,
            withheld_tool_calls {json} NOT NULL DEFAULT '[]',
            parse_failures {json} NOT NULL DEFAULT '[]',
            input_tokens {big},
            output_tokens {big},
            cache_read_tokens {big},
            cache_creation_tokens {big},
            error_class TEXT,
            client_aborted {boolean} NOT NULL DEFAULT {false},
            runaway_streak INTEGER,
            content {json}
        )""",
        f"CREATE INDEX {TABLE}_started_at ON {TABLE} (started_at)",
        f"CREATE INDEX {TABLE}_provider_started_at ON {TABLE} (provider, started_at)",
    ]


def _drops_and_response_ids_v3(dialect: str) -> list[str]:
    json = "JSONB" if dialect == "postgresql" else "TEXT"
    # SQLite adds one column per statement; PostgreSQL takes the same statements.
    return [
        f"ALTER TABLE {TABLE} ADD COLUMN dropped_fields {json}",
        f"ALTER TABLE {TABLE} ADD COLUMN dropped_tools INTEGER NOT NULL DEFAULT 0",
        f"ALTER TABLE {TABLE} ADD COLUMN dropped_input_items INTEGER NOT NULL DEFAULT 0",
        f"ALTER TABLE {TABLE} ADD COLUMN response_id TEXT",
        f"ALTER TABLE {TABLE} ADD COLUMN previous_response_id TEXT",
    ]


def _attempts_timeout_key_v4(dialect: str) -> list[str]:
    json = "JSONB" if dialect == "postgresql" else "TEXT"
    return [
        f"ALTER TABLE {TABLE} ADD COLUMN attempts {json} NOT NULL DEFAULT '[]'",
        f"ALTER TABLE {TABLE} ADD COLUMN timeout TEXT",
        f"ALTER TABLE {TABLE} ADD COLUMN key_name TEXT",
    ]


def _cost_v5(dialect: str) -> list[str]:
    real = "DOUBLE PRECISION" if dialect == "postgresql" else "REAL"
    return [
        f"ALTER TABLE {TABLE} ADD COLUMN cost_usd {real}",
        f"ALTER TABLE {TABLE} ADD COLUMN cost_source TEXT",
    ]


def _json_type(dialect: str) -> str:
    return "JSONB" if dialect == "postgresql" else "TEXT"


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "audit_records with one column per AuditRecord field",
        {d: _audit_records_v1(d) for d in DIALECTS},
    ),
    Migration(
        2,
        "audit_records.ended_by: who ended an exchange early (client or server)",
        {d: [f"ALTER TABLE {TABLE} ADD COLUMN ended_by TEXT"] for d in DIALECTS},
    ),
    Migration(
        3,
        "audit_records: what the request translation dropped (field names, tool and input item "
        "counts); the Responses response_id and previous_response_id",
        {d: _drops_and_response_ids_v3(d) for d in DIALECTS},
    ),
    Migration(
        4,
        "audit_records: every attempt (target, outcome, duration), the timeout that fired, and "
        "the gateway key's name",
        {d: _attempts_timeout_key_v4(d) for d in DIALECTS},
    ),
    Migration(
        5,
        "audit_records: what the exchange cost in USD (NULL: unknown) and where its price came "
        "from (table or route)",
        {d: _cost_v5(d) for d in DIALECTS},
    ),
    Migration(
        6,
        "audit_records.operation: what the exchange asked for (generate, count_tokens, embed)",
        {
            d: [f"ALTER TABLE {TABLE} ADD COLUMN operation TEXT NOT NULL DEFAULT 'generate'"]
            for d in DIALECTS
        },
    ),
    Migration(
        7,
        "audit_records.recovered: a stream cut after its first byte and continued ([recovery]): "
        "breaks, continuations at max tokens, where, by which targets, why",
        {d: [f"ALTER TABLE {TABLE} ADD COLUMN recovered {_json_type(d)}"] for d in DIALECTS},
    ),
    Migration(
        8,
        "audit_records.estimated_tokens: the upstream sent no usage, the gateway's estimate "
        "for the key's token budget",
        {d: [f"ALTER TABLE {TABLE} ADD COLUMN estimated_tokens INTEGER"] for d in DIALECTS},
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

_VERSION_TABLE = {
    "sqlite": """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at REAL NOT NULL)""",
    "postgresql": """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY, description TEXT NOT NULL,
        applied_at DOUBLE PRECISION NOT NULL)""",
}

# pg_advisory_xact_lock key serializing migrations across replicas that start at once
# (an arbitrary constant: the bytes of "gwaudit1" as a signed 64-bit integer).
ADVISORY_LOCK_KEY = int.from_bytes(b"gwaudit1", "big", signed=True)


class MigrationError(RuntimeError):
    """The migration list is malformed (unordered versions, a dialect missing)."""


def check(migrations: Sequence[Migration]) -> None:
    """Versions must run 1, 2, 3... and every migration must cover every dialect."""
    for expected, m in enumerate(migrations, start=1):
        if m.version != expected:
            raise MigrationError(f"migration #{expected} has version {m.version}")
        missing = [d for d in DIALECTS if d not in m.statements]
        if missing:
            raise MigrationError(f"migration {m.version} has no statements for {missing}")


def pending(current: int, migrations: Sequence[Migration]) -> list[Migration]:
    """The migrations a database at version `current` still needs, in order."""
    check(migrations)
    latest = migrations[-1].version if migrations else 0
    if current > latest:
        # A newer replica migrated already; migrations only add, so older code keeps working.
        log.warning("audit schema is at version %d, newer than this gateway's %d", current, latest)
    return [m for m in migrations if m.version > current]


def migrate_sqlite(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring a SQLite database to the latest version in one transaction; returns the version.

    The connection must be in autocommit mode (`isolation_level=None`): the transaction is
    explicit, and `BEGIN IMMEDIATE` takes the write lock first so two processes opening the
    same file at once migrate one after the other.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_VERSION_TABLE["sqlite"])
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
        current = int(row[0])
        todo = pending(current, migrations)
        for m in todo:
            for statement in m.statements["sqlite"]:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                (m.version, m.description, time.time()),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if todo:
        log.info("audit schema (sqlite) migrated from version %d to %d", current, todo[-1].version)
        return todo[-1].version
    return current


async def migrate_postgresql(
    conn: asyncpg.Connection, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Bring a PostgreSQL schema to the latest version in one transaction; returns the version.

    A transaction-scoped advisory lock serializes replicas that start at once: the second one
    waits, then finds the work done. Tables go to the first schema of the connection's
    `search_path`.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", ADVISORY_LOCK_KEY)
        await conn.execute(_VERSION_TABLE["postgresql"])
        current = int(await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
        todo = pending(current, migrations)
        for m in todo:
            for statement in m.statements["postgresql"]:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES ($1, $2, $3)",
                m.version,
                m.description,
                time.time(),
            )
    if todo:
        log.info(
            "audit schema (postgresql) migrated from version %d to %d", current, todo[-1].version
        )
        return todo[-1].version
    return current
