"""Which audit store a URL names; each backend's module is imported only when named (asyncpg only
for PostgreSQL), and the backends import the seam in gateway.audit.store, never this module."""

from __future__ import annotations

from gateway.audit.store import (
    OFF_NOTE,
    POSTGRES_SCHEMES,
    SUPPORTED,
    AuditStore,
    audit_off,
    redact_url,
    sqlite_path,
)


def open_store(url: str) -> AuditStore:
    """The store for `url`, not yet opened (call `await store.open()`). ValueError for `off`:
    there is no store, and a caller that opens one anyway is told so."""
    if audit_off(url):
        raise ValueError(f"the audit trail is {OFF_NOTE}: there is no store to open")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        from gateway.audit.sqlite_store import SQLiteStore

        return SQLiteStore(sqlite_path(url))
    if scheme in POSTGRES_SCHEMES:
        from gateway.audit.postgres_store import PostgresStore

        return PostgresStore(url)
    raise ValueError(
        f"unsupported audit store scheme {scheme or '(none)'!r} in {redact_url(url)}; "
        f"supported: {SUPPORTED}"
    )
