"""The building blocks of every settings table: the error, the frozen strict base, and the
value forms TOML gives (seconds or a duration string, bytes or a size string)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field

NonEmptyStr = Annotated[str, Field(min_length=1)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ConfigError(Exception):
    """A configuration problem; `problems` holds (dotted key path or None, message) pairs."""

    def __init__(self, source: str | None, problems: Sequence[tuple[str | None, str]]) -> None:
        self.source = source
        self.problems = tuple(problems)
        where = f"config error in {source}" if source else "config error"
        lines = (f"{where}: {key}: {msg}" if key else f"{where}: {msg}" for key, msg in problems)
        super().__init__("\n".join(lines))


class Frozen(BaseModel):
    """A part of the settings. strict: TOML values are already typed, so `port = "80"` or
    `port = true` is a mistake. defer_build: a model's validator is built when it first
    validates, in the process that reads the file; a worker (gateway.worker) unpickles the
    settings it is given and never validates them, so it does not build them (some 6 ms of its
    start)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)?")
_DURATION_UNITS: Final = {None: 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE: Final = re.compile(r"(\d+)\s*(B|KiB|MiB|GiB)?")
_SIZE_UNITS: Final = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def parse_duration(value: Any) -> Any:
    """Seconds as a number, or a string such as "90s", "30m", "1h", "24h", "7d"."""
    if isinstance(value, str):
        match = _DURATION.fullmatch(value.strip())
        if match is None:
            raise ValueError('must be seconds or a duration such as "30m", "1h", "24h"')
        return float(match[1]) * _DURATION_UNITS[match[2]]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def parse_size(value: Any) -> Any:
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip())
        if match is None:
            raise ValueError('must be bytes or a size such as "64MiB", "1GiB"')
        return int(match[1]) * _SIZE_UNITS[match[2]]
    return value


_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")
_MESSAGES: Final[Mapping[str, str]] = {
    "extra_forbidden": "unknown key",
    "missing": "required key missing",
    "model_type": "must be a table",
    "dict_type": "must be a table",
    "tuple_type": "must be an array of tables",
    "string_too_short": "must not be empty",
    "too_short": "must not be empty",
}


def _problem(err: Mapping[str, Any]) -> tuple[str | None, str]:
    # Never echo err["input"]: it may be an API key.
    msg = _MESSAGES.get(err["type"])
    if msg is None:
        msg = err["msg"].removeprefix("Value error, ").replace("Input should be", "must be", 1)
    return _key_path(err["loc"]) or None, msg


def _key_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            key = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
            path += f".{key}" if path else key
    return path
