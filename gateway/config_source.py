"""Which configuration file `gateway serve` reads: `--config`, `$GATEWAY_CONFIG`, or the built-in
default. Below both gateway.startup (which reports it) and gateway.workers (which hands it to each
worker)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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
