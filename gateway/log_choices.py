"""The values of `[logging] level` and `format` (and `--log-level`, `--log-format`): the command
line reads them without the settings' models (pydantic)."""

from __future__ import annotations

from typing import Final, Literal, get_args

LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["json", "console", "auto"]
LOG_LEVELS: Final[tuple[str, ...]] = get_args(LogLevel)
LOG_FORMATS: Final[tuple[str, ...]] = get_args(LogFormat)
