"""The console form of the log lines (`--log-format console`, or `auto` on a terminal): one
readable line per record instead of a JSON object, for people watching a terminal (the
exchange's line is a summary of its record, in a fixed order):

    12:03:04.123 INFO exchange id=01a234c9… client=openai provider=openai model=gpt-x status=200
        stop=length native=length truncated=true cut=length withheld=1 tokens=12/4096 ttfb=40ms
        812ms

(one line; wrapped here). Other lines: `HH:MM:SS.mmm LEVEL message key=value ...`. Like the JSON
form it adds no content of its own, and never shows the record's `content` (`log_content`).
Text that is not plain (spaces, quotes, control characters a client could put in a model name
to move a terminal's cursor) is shown JSON-quoted, escapes and all.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import orjson

from gateway.log_fields import FIELDS, STANDARD_ATTRIBUTES

EXCHANGE: Final = ("gateway.exchange", "exchange")  # the (logger, message) of the exchange line
_PLAIN: Final = re.compile(r"[\w.:/@+*-]+", re.ASCII)


class ConsoleFormatter(logging.Formatter):
    """`always`: fields every line carries (a worker's number), shown last."""

    def __init__(self, always: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._always = dict(always or {})

    def format(self, record: logging.LogRecord) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(record.created))
        millis = int((record.created % 1) * 1000)
        message = record.getMessage()
        fields = _fields(record)
        if (record.name, message) == EXCHANGE:
            pairs = list(exchange_pairs(fields))
        else:
            pairs = [(key, value) for key, value in fields.items() if key != "content"]
        if record.exc_info and record.exc_info[0] is not None:
            pairs.append(("exception_class", record.exc_info[0].__name__))
        pairs += self._always.items()
        shown = (f"{key}={_value(value)}" if key else _value(value) for key, value in pairs)
        text = " ".join([_text(message, quote=False), *shown])
        return f"{clock}.{millis:03d} {record.levelname} {text}"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """What the JSON form would add to the line (gateway.logs.JsonFormatter)."""
    extra = record.__dict__
    fields = extra.get(FIELDS)
    if type(fields) is bytes:
        loaded = orjson.loads(fields)
        return loaded if isinstance(loaded, dict) else {}
    if type(fields) is dict:
        return fields
    return {
        key: value
        for key, value in extra.items()
        if key not in STANDARD_ATTRIBUTES and not key.startswith("_")
    }


def _tokens(f: Mapping[str, Any]) -> Any:
    if f.get("input_tokens") is None and f.get("output_tokens") is None:
        return None
    return f"{_count(f.get('input_tokens'))}/{_count(f.get('output_tokens'))}"


def _count(value: Any) -> str:
    return "?" if value is None else str(value)


def _list_length(value: Any) -> Any:
    return len(value) if isinstance(value, list) and value else None


def _upstream(f: Mapping[str, Any]) -> Any:
    upstream = f.get("upstream_model")
    return None if upstream == f.get("model") else upstream


# The exchange line: (label, what of the record's JSON fields it shows; None: left out).
_EXCHANGE: Final[tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...]] = (
    ("id", lambda f: f.get("id")),
    ("client", lambda f: f.get("client_format")),
    ("op", lambda f: None if f.get("operation") in (None, "generate") else f["operation"]),
    ("provider", lambda f: f.get("provider")),
    ("model", lambda f: f.get("model") or None),
    ("upstream", _upstream),
    ("stream", lambda f: True if f.get("stream") else None),
    ("status", lambda f: f.get("http_status")),
    ("stop", lambda f: f.get("stop_reason")),
    ("native", lambda f: f.get("native_stop_reason")),
    ("truncated", lambda f: bool(f.get("truncated"))),
    ("cut", lambda f: f.get("cut_reason")),
    ("tools", lambda f: f.get("tool_calls") or None),
    ("withheld", lambda f: _list_length(f.get("withheld_tool_calls"))),
    ("parse_failures", lambda f: _list_length(f.get("parse_failures"))),
    ("attempts", lambda f: len(f["attempts"]) if len(f.get("attempts") or ()) > 1 else None),
    ("tokens", _tokens),
    ("cost_usd", lambda f: f.get("cost_usd")),
    ("error", lambda f: f.get("error_class")),
    ("timeout", lambda f: f.get("timeout")),
    ("ended_by", lambda f: f.get("ended_by")),
    ("runaway", lambda f: f.get("runaway_streak")),
    ("key", lambda f: f.get("key_name")),
    ("ttfb", lambda f: None if f.get("ttfb_ms") is None else _Millis(f["ttfb_ms"])),
)


class _Millis(float):
    def __str__(self) -> str:
        return f"{self:.0f}ms"


def exchange_pairs(fields: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The summary of an exchange's record, ending with its total time (bare, `812ms`)."""
    for label, read in _EXCHANGE:
        value = read(fields)
        if value is not None:
            yield label, value
    total = fields.get("total_ms")
    if total is not None:
        yield "", _Millis(total)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _Millis):
        return str(value)
    if isinstance(value, str):
        return _text(value, quote=True)
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, default=str, separators=(",", ":"))  # ASCII: escapes and all


def _text(text: str, *, quote: bool) -> str:
    """`text` as it is when plain, else JSON-quoted in ASCII (control characters, and
    characters that reorder a terminal's text, escaped)."""
    if _PLAIN.fullmatch(text) or (not quote and text.isascii() and text.isprintable()):
        return text
    quoted = json.dumps(text)
    return quoted if quote else quoted[1:-1]
