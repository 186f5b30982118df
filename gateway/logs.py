"""Structured logs: one JSON object per line on stderr.

Fields given through `extra=` become top-level keys; the standard LogRecord attributes other
than the time, level, logger and message are left out. A call site with many fields passes them
as one dict, `extra={FIELDS: {...}}`: logging then copies one attribute instead of each field,
which matters for the line every exchange writes. Nothing here adds content of its own:
what a log line holds is what its call site put there, and call sites never pass message text,
tool arguments or credentials (exception messages included: they can quote request data).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

import orjson

FIELDS = "fields"  # an extra= key whose dict value is merged into the line

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """`always`: fields every line carries (a worker's `worker` number: several workers write to
    one stderr); a call site's field of the same name wins."""

    def __init__(self, always: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._always = dict(always or {})

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **self._always,
        }
        extra = record.__dict__
        fields = extra.get(FIELDS)
        if type(fields) is dict:
            line.update(fields)
        else:
            for key, value in extra.items():
                if key not in _STANDARD and not key.startswith("_"):
                    line[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["exception_class"] = record.exc_info[0].__name__
        return orjson.dumps(line, default=str).decode()


def configure(level: int = logging.INFO, always: Mapping[str, Any] | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(always))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log would repeat each exchange without the audit fields
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
