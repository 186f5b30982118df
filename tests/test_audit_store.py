"""The audit stores: the same tests on SQLite and on PostgreSQL (see tests/audit_util.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from gateway.audit.migrations import (
    COLUMNS,
    JSON_COLUMNS,
    LATEST_VERSION,
    MIGRATIONS,
    Migration,
    MigrationError,
    check,
    migrate_postgresql,
    migrate_sqlite,
)
from gateway.audit.opening import open_store
from gateway.audit.postgres_store import PostgresStore
from gateway.audit.postgres_store import encode as postgres_encode
from gateway.audit.record import AuditRecord
from gateway.audit.sqlite_store import CACHE_KIB, SQLiteStore
from gateway.audit.sqlite_store import encode as sqlite_encode
from gateway.audit.store import redact_url
from tests.audit_util import (
    BACKENDS,
    T0,
    Backend,
    full_record,
    open_backend,
    postgres_url,
    sparse_record,
)

ALL_VERSIONS = [m.version for m in MIGRATIONS]
NEXT = LATEST_VERSION + 1

# A test-only next version: what a later schema change looks like.
V_NEXT = Migration(
    NEXT,
    "test: add a note column",
    {
        "sqlite": ["ALTER TABLE audit_records ADD COLUMN test_note TEXT NOT NULL DEFAULT 'none'"],
        "postgresql": [
            "ALTER TABLE audit_records ADD COLUMN test_note TEXT NOT NULL DEFAULT 'none'"
        ],
    },
)
# A next version that fails halfway: its first statement must be rolled back with it.
V_NEXT_BROKEN = Migration(
    NEXT,
    "test: broken",
    {
        d: [
            "ALTER TABLE audit_records ADD COLUMN test_note TEXT",
            "ALTER TABLE no_such_table ADD COLUMN x TEXT",
        ]
        for d in ("sqlite", "postgresql")
    },
)


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with open_backend(request.param, tmp_path) as b:
        yield b


# --- schema and migrations ----------------------------------------------------------------------


def test_columns_are_the_record_fields() -> None:
    assert tuple(f.name for f in dataclasses.fields(AuditRecord)) == COLUMNS


async def test_schema_created_on_first_use_with_its_version(backend: Backend) -> None:
    if backend.path is not None:
        assert not backend.path.parent.exists()
    store = backend.store()
    await store.open()
    if backend.path is not None:
        assert backend.path.is_file()
    assert await backend.versions() == ALL_VERSIONS
    assert ALL_VERSIONS[-1] == LATEST_VERSION
    assert await backend.columns() == list(COLUMNS)
    assert await backend.count() == 0


async def test_first_write_creates_the_schema_without_open(backend: Backend) -> None:
    store = backend.store()
    await store.write([full_record(1)])
    assert await backend.versions() == ALL_VERSIONS
    assert [r.id for r in await store.fetch()] == ["req-00001"]


async def test_reopening_is_a_no_op(backend: Backend) -> None:
    first = backend.store()
    await first.write([full_record(1)])
    await first.close()
    second = backend.store()
    await second.open()
    assert await backend.rows(
        "SELECT version, description FROM schema_version ORDER BY version"
    ) == [(m.version, m.description) for m in MIGRATIONS]
    assert await second.fetch() == [full_record(1)]


async def test_older_database_is_migrated(backend: Backend) -> None:
    old = backend.store()
    await old.write([full_record(1)])
    await old.close()
    assert await backend.versions() == ALL_VERSIONS

    new = backend.store(migrations=(*MIGRATIONS, V_NEXT))
    await new.open()
    assert await backend.versions() == [*ALL_VERSIONS, NEXT]
    assert await backend.columns() == [*COLUMNS, "test_note"]
    assert await backend.rows("SELECT id, test_note FROM audit_records") == [("req-00001", "none")]
    await new.write([full_record(2)])
    assert [r.id for r in await new.fetch()] == ["req-00002", "req-00001"]


async def test_failed_migration_leaves_the_previous_version(backend: Backend) -> None:
    old = backend.store()
    await old.open()
    await old.close()
    broken = backend.store(migrations=(*MIGRATIONS, V_NEXT_BROKEN))
    with pytest.raises((sqlite3.OperationalError, asyncpg.PostgresError)):
        await broken.open()
    assert await backend.versions() == ALL_VERSIONS
    assert "test_note" not in await backend.columns()  # the first statement was rolled back too


async def test_replicas_starting_at_once_migrate_once(backend: Backend) -> None:
    stores = [backend.store() for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    assert await backend.versions() == ALL_VERSIONS
    await asyncio.gather(*(s.write([full_record(i)]) for i, s in enumerate(stores)))
    assert await backend.count() == 4


def test_malformed_migration_lists_are_refused() -> None:
    with pytest.raises(MigrationError, match="version 3"):
        check([MIGRATIONS[0], V_NEXT._replace(version=3)])
    with pytest.raises(MigrationError, match="postgresql"):
        check([MIGRATIONS[0], V_NEXT._replace(version=2, statements={"sqlite": []})])


# The columns of each older schema version: version 2 added `ended_by`, version 3 the drops
# and the Responses ids, version 4 the attempts, the timeout and the key name, version 5 the
# cost. Every column beyond them reads back as its field's default.
OLD_COLUMNS = {
    1: COLUMNS[: COLUMNS.index("ended_by")],
    2: COLUMNS[: COLUMNS.index("dropped_fields")],
    3: COLUMNS[: COLUMNS.index("attempts")],
    4: COLUMNS[: COLUMNS.index("cost_usd")],
}


def as_at_version(record: AuditRecord, version: int) -> AuditRecord:
    """`record` with every field its version did not have at its default."""
    defaults = sparse_record(0)
    later = COLUMNS[len(OLD_COLUMNS[version]) :]
    return dataclasses.replace(record, **{name: getattr(defaults, name) for name in later})


async def seed_at_version(backend: Backend, version: int, record: AuditRecord) -> None:
    """A trail created by a gateway at schema `version`, holding `record` (its columns only)."""
    migrations, columns = MIGRATIONS[:version], OLD_COLUMNS[version]
    if backend.kind == "sqlite":
        assert backend.path is not None
        path = backend.path

        def seed() -> None:  # off the loop, as the store itself does its SQLite work
            path.parent.mkdir(parents=True)
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                migrate_sqlite(conn, migrations)
                conn.execute(
                    f"INSERT INTO audit_records ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' for _ in columns)})",
                    sqlite_encode(record)[: len(columns)],
                )
            finally:
                conn.close()

        await asyncio.to_thread(seed)
        return
    conn = await asyncpg.connect(backend.url)
    try:
        await migrate_postgresql(conn, migrations)
        placeholders = ", ".join(
            f"${i}::jsonb" if c in JSON_COLUMNS else f"${i}" for i, c in enumerate(columns, 1)
        )
        await conn.execute(
            f"INSERT INTO audit_records ({', '.join(columns)}) VALUES ({placeholders})",
            *postgres_encode(record)[: len(columns)],
        )
    finally:
        await conn.close()


@pytest.mark.parametrize("version", sorted(OLD_COLUMNS))
async def test_an_older_database_is_migrated_keeping_its_rows(
    backend: Backend, version: int
) -> None:
    """A trail written by a gateway of an older schema opens, gains the later columns, and keeps
    every row, which reads back with those fields at their defaults; new rows hold them all."""
    old = as_at_version(full_record(1), version)
    await seed_at_version(backend, version, old)
    assert await backend.versions() == list(range(1, version + 1))

    store = backend.store()
    await store.open()
    assert await backend.versions() == ALL_VERSIONS
    assert await backend.columns() == list(COLUMNS)
    await store.write([full_record(2)])
    got = {r.id: r for r in await store.fetch()}
    assert got["req-00001"] == old
    assert got["req-00001"].cost_usd is None and got["req-00001"].cost_source is None
    if version < 4:
        assert got["req-00001"].attempts == [] and got["req-00001"].key_name is None
    if version < 3:
        assert got["req-00001"].dropped_fields is None and got["req-00001"].dropped_tools == 0
    assert got["req-00002"] == full_record(2)


# --- writing and reading ------------------------------------------------------------------------


async def test_every_field_round_trips(backend: Backend) -> None:
    store = backend.store()
    full = full_record(1)
    sparse = sparse_record(0)
    half = sparse_record(2, terminator_seen=True, content={}, withheld_tool_calls=[])
    await store.write([full, sparse, half])
    got = await store.fetch()
    assert got == [half, full, sparse]
    # Equality would accept 1 for True: the types must come back too.
    for record in got:
        for f in ("stream", "truncated", "client_aborted"):
            assert type(getattr(record, f)) is bool
    assert got[1].terminator_seen is False and got[0].terminator_seen is True
    assert got[1].ended_by == "server" and got[2].ended_by is None
    assert got[2].terminator_seen is None and got[2].content is None
    assert got[0].content == {}
    assert got[1].started_at == T0 + 1 and got[1].first_byte_at == T0 + 1.125
    assert got[1].withheld_tool_calls == [{"id": "call_1", "name": "get_weather"}]
    assert (got[1].dropped_fields, got[1].dropped_tools, got[1].dropped_input_items) == (
        ["response_format", "seed"],
        2,
        3,
    )
    assert got[1].response_id == f"resp_{1:032x}"
    assert got[1].previous_response_id == f"resp_{1001:032x}"
    assert (got[2].dropped_fields, got[2].dropped_tools, got[2].response_id) == (None, 0, None)
    for record in got:
        assert type(record.dropped_tools) is int and type(record.dropped_input_items) is int
    assert got[1].content == {
        "messages": [{"role": "user", "text": "héllo ✓"}],
        "n": 1,
        "ok": None,
    }


async def test_fetch_filters_and_orders_newest_first(backend: Backend) -> None:
    store = backend.store()
    records = [full_record(i, truncated=i % 3 == 0) for i in range(10)]
    await store.write(records[5:])
    await store.write(records[:5])
    ids = [f"req-{i:05d}" for i in range(10)]

    assert [r.id for r in await store.fetch()] == ids[::-1]
    assert [r.id for r in await store.fetch(since=T0 + 6)] == [
        "req-00009",
        "req-00008",
        "req-00007",
        "req-00006",
    ]
    assert [r.id for r in await store.fetch(truncated_only=True)] == [
        "req-00009",
        "req-00006",
        "req-00003",
        "req-00000",
    ]
    assert [r.id for r in await store.fetch(limit=3)] == ["req-00009", "req-00008", "req-00007"]
    assert [r.id for r in await store.fetch(since=T0 + 1, truncated_only=True, limit=2)] == [
        "req-00009",
        "req-00006",
    ]
    assert await store.fetch(since=T0 + 100) == []
    assert await store.fetch(limit=0) == []


async def test_a_repeated_id_is_ignored(backend: Backend) -> None:
    """A batch retried after a lost reply must not fail or duplicate (ON CONFLICT / OR IGNORE)."""
    store = backend.store()
    await store.write([full_record(1), full_record(2)])
    retry = [full_record(1, provider="changed"), full_record(2), full_record(3)]
    await store.write(retry)
    await store.write([full_record(4), full_record(4, model="twin")])  # duplicate within a batch
    assert await backend.count() == 4
    got = {r.id: r for r in await store.fetch()}
    assert got["req-00001"] == full_record(1)
    assert got["req-00004"].model == "client-model-4"


async def test_an_empty_batch_writes_nothing(backend: Backend) -> None:
    store = backend.store()
    await store.open()
    await store.write([])
    assert await backend.count() == 0


async def test_a_closed_store_refuses_work(backend: Backend) -> None:
    store = backend.store()
    await store.open()
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.write([full_record(1)])


# --- SQLite specifics ---------------------------------------------------------------------------


async def test_sqlite_is_in_wal_mode_and_intact_after_writes(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "audit.db"
    store = SQLiteStore(path)
    await store.write([full_record(i) for i in range(200)])
    assert store._conn is not None
    assert store._conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    assert store._conn.execute("PRAGMA cache_size").fetchone() == (-CACHE_KIB,)  # KiB, not pages
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT COUNT(*) FROM audit_records").fetchone() == (200,)
    finally:
        conn.close()
    wal = path.with_name("audit.db-wal")
    assert wal.stat().st_size > 0
    reader = sqlite3.connect(path)  # another process reading (say `gateway audit`) keeps the
    try:  # WAL file alive past the store's close: the store's own checkpoint must empty it
        assert reader.execute("SELECT COUNT(*) FROM audit_records").fetchone() == (200,)
        await store.close()
        assert wal.stat().st_size == 0
    finally:
        reader.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT COUNT(*) FROM audit_records").fetchone() == (200,)
        assert conn.execute("PRAGMA index_list(audit_records)").fetchall()
        index_names = {r[1] for r in conn.execute("PRAGMA index_list(audit_records)")}
        assert {"audit_records_started_at", "audit_records_provider_started_at"} <= index_names
    finally:
        conn.close()


async def test_sqlite_stores_bools_as_integers_and_lists_as_json(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    store = SQLiteStore(path)
    await store.write([full_record(1), sparse_record(2)])
    await store.close()
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT id, stream, truncated, terminator_seen, withheld_tool_calls, content "
            "FROM audit_records ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    assert rows == [
        (
            "req-00001",
            1,
            1,
            0,
            '[{"id":"call_1","name":"get_weather"}]',
            '{"messages":[{"role":"user","text":"héllo ✓"}],"n":1,"ok":null}',
        ),
        ("sparse-00002", 0, 0, None, "[]", None),
    ]


def test_sqlite_binds_nones_and_bools_through_registered_adapters() -> None:
    """Without an adapter for their type, sqlite3 asks `PrepareProtocol` for `__adapt__` for
    every None and bool it binds, an AttributeError formatted and dropped each time; the store
    registers ones that bind them as before (the test above: NULL, and 0 or 1)."""
    for value, bound in ((None, None), (True, 1), (False, 0)):
        adapted = sqlite3.adapters[(type(value), sqlite3.PrepareProtocol)](value)
        assert adapted == bound and type(adapted) is type(bound)


# --- PostgreSQL specifics -----------------------------------------------------------------------


async def test_postgres_column_types(tmp_path: Path) -> None:
    async with open_backend("postgresql", tmp_path) as backend:
        await backend.store().open()
        types = dict(
            await backend.rows(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'audit_records'"
            )
        )
        assert types["started_at"] == "double precision"
        assert types["stream"] == "boolean"
        assert types["terminator_seen"] == "boolean"
        assert types["withheld_tool_calls"] == "jsonb"
        assert types["content"] == "jsonb"
        assert types["input_tokens"] == "bigint"
        indexes = {
            r[0]
            for r in await backend.rows(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
            )
        }
        assert {"audit_records_started_at", "audit_records_provider_started_at"} <= indexes


async def test_postgres_password_never_in_errors_or_url() -> None:
    good = postgres_url()
    user_host = good.split("://", 1)[1].split("@", 1)[1]
    bad = f"postgresql://gateway:hunter2-SECRET@{user_host}"
    store = PostgresStore(bad)
    assert "hunter2" not in store.url and store.url.startswith("postgresql://gateway:***@")
    with pytest.raises(Exception) as caught:
        await store.open()
    assert "hunter2" not in str(caught.value) and "hunter2" not in repr(caught.value)


# --- open_store ---------------------------------------------------------------------------------


async def test_open_store_relative_sqlite_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///rel/dir/audit.db")
    assert isinstance(store, SQLiteStore) and store.path == Path("rel/dir/audit.db")
    await store.write([full_record(1)])
    await store.close()
    assert (tmp_path / "rel" / "dir" / "audit.db").is_file()


def test_open_store_absolute_sqlite_path(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/abs.db")  # tmp_path starts with "/": four slashes
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / "abs.db"
    assert store.url == f"sqlite:///{tmp_path}/abs.db"


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_open_store_postgres(scheme: str) -> None:
    store = open_store(f"{scheme}://gw:s3cret-pw@db.example:5433/audit?sslmode=require")
    assert isinstance(store, PostgresStore)
    assert store.url == f"{scheme}://gw:***@db.example:5433/audit?sslmode=require"


@pytest.mark.parametrize(
    "url",
    ["mysql://root:s3cret-pw@localhost/db", "s3cret-pw", "http://u:s3cret-pw@h/x", "sqlite://x.db"],
)
def test_open_store_refuses_other_urls_without_leaking_the_password(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        open_store(url)
    message = str(caught.value)
    assert "s3cret-pw" not in message
    if not url.startswith("sqlite"):
        assert "sqlite:///" in message and "postgresql://" in message
    if url.startswith("mysql"):
        assert "'mysql'" in message


def test_redact_url() -> None:
    assert redact_url("postgresql://u:p%40ss@h:1/d") == "postgresql://u:***@h:1/d"
    assert redact_url("postgresql://u@h/d") == "postgresql://u@h/d"
    assert redact_url("postgresql://h/d?user=u&password=pw") == (
        "postgresql://h/d?user=u&password=***"
    )
    assert redact_url("sqlite:////var/lib/audit.db") == "sqlite:////var/lib/audit.db"
