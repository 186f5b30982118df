"""What `gateway serve` runs on: the configuration's source and the audit store's location."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gateway.audit.store import open_store, redact_url, sqlite_path

ConfigOrigin = Literal["--config", "$GATEWAY_CONFIG", "built-in default"]


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """The configuration file in use (an absolute path), or None for the built-in default."""

    path: Path | None
    origin: ConfigOrigin

    def label(self) -> str:
        return f"{self.path} ({self.origin})" if self.path else "the built-in default"


def config_source(flag: str | None, env: Mapping[str, str]) -> ConfigSource:
    """`--config`, else `$GATEWAY_CONFIG` (when not empty), else the built-in default."""
    if flag is not None:
        return ConfigSource(Path(os.path.abspath(flag)), "--config")
    from_env = env.get("GATEWAY_CONFIG")
    if from_env:
        return ConfigSource(Path(os.path.abspath(from_env)), "$GATEWAY_CONFIG")
    return ConfigSource(None, "built-in default")


def store_location(url: str) -> str:
    """Where the audit store at `url` keeps its records, for people to read: the absolute path a
    SQLite URL opens (relative paths start at the working directory), any other URL without its
    password. ValueError (naming the URL without its password) when the gateway cannot open it."""
    open_store(url)  # constructs without connecting: only to refuse the URLs it refuses
    if url.partition(":")[0].lower() == "sqlite":
        path = sqlite_path(url)
        return "in memory (not kept)" if path == ":memory:" else os.path.abspath(path)
    return redact_url(url)
