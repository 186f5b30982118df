"""The audit store seam: where records are kept, chosen by URL.

    store = open_store("sqlite:///gateway-audit.db")   # gateway.audit.opening; or postgresql://
    await store.open()                                  # creates or migrates the schema
    await store.write(records)
    rows = await store.fetch(since=time.time() - 86400)
    await store.close()

URLs: `sqlite:///relative/path.db` and `sqlite:////absolute/path.db` (SQLAlchemy's meaning: three
slashes, then the path), `postgresql://user:password@host:port/db` or `postgres://...` (any
libpq-style query parameter asyncpg knows; others, such as `?search_path=audit`, are sent as server
settings). A store's `url` attribute and every message about it carry the URL without its password.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from gateway.audit.record import AuditRecord

SQLITE_PREFIX = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql", "postgres")
SUPPORTED = "sqlite:///PATH, postgresql://..., postgres://..., or off"
# `[audit] store = "off"`: no trail at all, the operator's explicit choice (the bench measures
# the gateway beside its audited twin with it). No store is opened and no record is written;
# the log line and the metrics still see every exchange.
AUDIT_OFF = "off"
OFF_NOTE = 'off: exchanges are not recorded ([audit] store = "off")'


def audit_off(url: str) -> bool:
    return url == AUDIT_OFF


class RecordRejected(Exception):
    """The store cannot hold a value of a record in the batch (a record problem, not an outage:
    writing the same batch again fails the same way). Nothing of the batch was written.

    `field` names the field when the store knows it; the message never quotes the value.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class AuditStore(Protocol):
    url: str

    async def open(self) -> None:
        """Connect; create the schema on first use or migrate it to the current version."""
        ...

    async def write(self, records: Sequence[AuditRecord]) -> None:
        """Insert a batch in one transaction; `RecordRejected` when a record holds a value the
        store cannot keep, any other exception when the store itself failed."""
        ...

    async def fetch(
        self, since: float | None = None, truncated_only: bool = False, limit: int | None = None
    ) -> list[AuditRecord]:
        """Records started at or after `since`, newest first."""
        ...

    async def close(self) -> None: ...

    # What the dashboard's aggregates run on (gateway.dashboard): the SQL dialect's name, one of
    # gateway.dashboard.sql.DIALECTS, and a read-only query that never holds up the writer.
    dialect: str

    async def read(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        """The rows of one read-only query, `params` bound in the dialect's placeholders."""
        ...


def redact_url(url: str) -> str:
    """`url` with its password (in the user info or a `password=` parameter) replaced by ***.

    Errs on the side of hiding: the user info runs to the last "@" before any "?", so a password
    holding an unescaped "/" or "@" is still hidden. A string without "://" is not echoed at all.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "<not a URL>"
    base, q, query = rest.partition("?")
    userinfo, at, after = base.rpartition("@")
    if at and ":" in userinfo:
        base = f"{userinfo.split(':', 1)[0]}:***@{after}"
    if q:
        query = "&".join(
            "password=***" if pair.split("=", 1)[0].lower() == "password" else pair
            for pair in query.split("&")
        )
    return f"{scheme}://{base}{q}{query}"


def sqlite_path(url: str) -> str:
    """The file path of a `sqlite:///...` URL: relative after three slashes, absolute after four."""
    if not url.startswith(SQLITE_PREFIX):
        raise ValueError(
            f"a SQLite store URL is sqlite:///relative/path.db or sqlite:////abs/path.db, "
            f"not {redact_url(url)}"
        )
    path = url[len(SQLITE_PREFIX) :]
    if not path:
        raise ValueError("a SQLite store URL needs a file path: sqlite:///path.db")
    return path
