"""The names both log formatters read (gateway.logs' JSON lines, gateway.log_console's readable
ones): the `extra=` key of a call site's field dict, and LogRecord's own attributes, left out."""

from __future__ import annotations

import logging

__all__ = ["FIELDS", "STANDARD_ATTRIBUTES"]

FIELDS = "fields"  # an extra= key whose dict value is merged into the line

STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
