"""The TOML configuration the process tests start `gateway serve` with: the offline mock provider
for `mock-*` models and an audit trail in a given SQLite file, with tables of a test's own.

    path.write_text(mock_config(tmp_path / "trail.db", audit='queue_size = 4\n'))
"""

from __future__ import annotations

from pathlib import Path

SERVER = """
[server]
host = "127.0.0.1"
port = 0
"""


def mock_config(db: Path, *, head: str = "", audit: str = "", tail: str = "") -> str:
    """`head` (say `SERVER`) first, then the mock and its route, the `[audit]` table with `audit`
    lines added to it, then `tail` (other tables)."""
    return f"""{head}
[providers.mock]
kind = "mock"

[[routes]]
match = "mock-*"
provider = "mock"

[audit]
store = "sqlite:///{db}"
{audit}{tail}"""
