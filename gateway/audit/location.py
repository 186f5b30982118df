"""Where the audit trail is, so that `gateway serve` and `gateway audit` find the same one from
any working directory.

- No `[audit] store` configured: the per-user data directory of the XDG Base Directory spec,
  `$XDG_DATA_HOME/llm-gateway/audit.db`, else `~/.local/share/llm-gateway/audit.db` (the store
  creates the directory on first write; `gateway audit` never creates anything).
- `sqlite:///relative.db` in a configuration file: relative to that file's directory.
- Anything else as given: absolute SQLite paths, PostgreSQL URLs, and `--store` on the command
  line, whose relative path is relative to where the command runs, like any path argument.

    url = resolve_store_url(configured_or_none, config_dir, os.environ)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from gateway.audit.store import SQLITE_PREFIX

APP_DIR: Final = "llm-gateway"
DEFAULT_FILE: Final = "audit.db"


def data_home(env: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME`, else `~/.local/share`; the spec ignores a relative XDG_DATA_HOME."""
    xdg = env.get("XDG_DATA_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".local" / "share"


def default_store_url(env: Mapping[str, str]) -> str:
    return f"{SQLITE_PREFIX}{data_home(env) / APP_DIR / DEFAULT_FILE}"


def resolve_store_url(
    store: str | None, config_dir: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> str:
    """The store URL to open: `store` as configured (None: not configured), a relative SQLite
    path taken relative to `config_dir` (the configuration file's directory, None without one).
    """
    if store is None:
        return default_store_url(env)
    if config_dir is None or not store.startswith(SQLITE_PREFIX):
        return store
    path = store[len(SQLITE_PREFIX) :]
    if not path or path == ":memory:" or os.path.isabs(path):
        return store
    return f"{SQLITE_PREFIX}{os.path.join(os.path.abspath(config_dir), path)}"
