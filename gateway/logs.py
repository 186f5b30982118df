"""Structured logs: one JSON object per line on stderr.

Fields given through `extra=` become top-level keys; the standard LogRecord attributes other
than the time, level, logger and message are left out. A call site with many fields passes them
as one dict, `extra={FIELDS: {...}}`: logging then copies one attribute instead of each field,
which matters for the line every exchange writes. Nothing here adds content of its own:
what a log line holds is what its call site put there, and call sites never pass message text,
tool arguments or credentials (exception messages included: they can quote request data).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any, TextIO

import orjson

FIELDS = "fields"  # an extra= key whose dict value is merged into the line

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._stamp = ""

    def _ts(self, record: logging.LogRecord) -> str:
        """The time to the millisecond; the part to the second is formatted once a second."""
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._stamp}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self._ts(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
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


class LoopBatchedHandler(logging.StreamHandler[TextIO]):
    """Writes the lines logged during one event-loop iteration together, in one write.

    Every exchange logs a line: written one by one, that is a system call each. Lines logged on
    the loop's thread wait for the end of the iteration (a `call_soon`); lines from another
    thread with no loop running are written at once, after those waiting. `flush` (also
    run by `logging.shutdown` at exit) writes whatever waits."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._pending: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # whose iteration the lines wait for

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._pending.append(line)
        if self._loop is not None:
            return  # a flush is scheduled
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self.flush()
            return
        try:
            loop.call_soon(self._flush_scheduled)
        except RuntimeError:  # the loop is closing
            self.flush()
            return
        self._loop = loop

    def _flush_scheduled(self) -> None:
        with self.lock or _NO_LOCK:
            self._loop = None
            self._write()

    def flush(self) -> None:
        with self.lock or _NO_LOCK:
            self._write()

    def _write(self) -> None:
        pending = self._pending
        if not pending:
            self.stream.flush()
            return
        self._pending = []
        text = "\n".join(pending) + "\n"
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:  # a closed or broken stderr must not break the exchange
            pass


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


_NO_LOCK = _NoLock()


def configure(level: int = logging.INFO) -> None:
    # The logging HOWTO's optimizations: no caller frame lookup, no thread or process names
    # gathered per record; the lines never carry them.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = LoopBatchedHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log would repeat each exchange without the audit fields
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
