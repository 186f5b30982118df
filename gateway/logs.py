"""Structured logs: one JSON object per line on stderr (or, for a terminal, one readable line:
gateway.log_console; `configure` chooses).

Fields given through `extra=` become top-level keys; the standard LogRecord attributes other
than the time, level, logger and message are left out. A call site with many fields passes them
as one dict, `extra={FIELDS: {...}}`: logging then copies one attribute instead of each field;
or as one JSON object already encoded, `extra={FIELDS: b'{...}'}`, spliced into the line as it
is (the line every exchange writes: its record encodes itself in one orjson call).

Nothing here adds content of its own: what a log line holds is what its call site put there,
and call sites never pass message text, tool arguments or credentials (exception messages
included: they can quote request data).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, Final, TextIO

import orjson

from gateway.log_fields import FIELDS, STANDARD_ATTRIBUTES


class JsonFormatter(logging.Formatter):
    """`always`: fields every line carries (a worker's `worker` number: several workers write to
    one stderr); a call site's field of the same name wins."""

    def __init__(self, always: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._always = dict(always or {})
        self._second = -1
        self._stamp = ""

    def _ts(self, created: float) -> str:
        """The time to the millisecond; the part to the second is formatted once a second."""
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"

    def info_line(self, logger: str, message: str, fields: bytes, created: float) -> str:
        """An info line with `fields`, a JSON object already encoded: what `format` makes of
        `logger.info(message, extra={FIELDS: fields})`, without a LogRecord."""
        head = orjson.dumps(
            {
                "ts": self._ts(created),
                "level": "info",
                "logger": logger,
                "message": message,
                **self._always,
            }
        )
        return (head[:-1] + b"," + fields[1:]).decode() if len(fields) > 2 else head.decode()

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self._ts(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **self._always,
        }
        extra = record.__dict__
        fields = extra.get(FIELDS)
        if type(fields) is bytes:
            head = orjson.dumps(line)
            return (head[:-1] + b"," + fields[1:]).decode() if len(fields) > 2 else head.decode()
        if type(fields) is dict:
            line.update(fields)
        else:
            for key, value in extra.items():
                if key not in STANDARD_ATTRIBUTES and not key.startswith("_"):
                    line[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["exception_class"] = record.exc_info[0].__name__
        return orjson.dumps(line, default=str).decode()


class LoopBatchedHandler(logging.StreamHandler[TextIO]):
    """Writes info lines in batches: at most `LINGER` seconds late, or once `BATCH` characters
    wait, in one write.

    Every exchange logs a line: written one by one, that is a system call each (and a wake-up
    of whatever reads stderr), which at low concurrency is a large share of an exchange's CPU.
    Lines logged on a thread running an event loop wait for a timer on that loop; a warning or
    an error is written at once, after the lines waiting before it; so is every line logged
    where no loop runs. `flush` (also run by `logging.shutdown` at exit) writes what waits."""

    def __init__(self, stream: TextIO, *, batching: bool = True) -> None:
        super().__init__(stream)
        assert self.lock is not None  # logging.Handler made it
        self._guard = self.lock  # what logging.Handler.handle holds around emit
        self.batching = batching  # False: every line at once
        self._pending: list[str] = []
        self._size = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # whose timer will write them

    def emit(self, record: logging.LogRecord) -> None:
        # Called under the handler's lock (logging.Handler.handle).
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._add(line, at_once=record.levelno >= logging.WARNING)

    def info(self, logger: str, message: str, fields: bytes) -> None:
        """`logging.getLogger(logger).info(message, extra={FIELDS: fields})`, the same line,
        without the LogRecord and the logger's walk to this handler (`info_fields`)."""
        formatter = self.formatter
        assert isinstance(formatter, JsonFormatter)
        line = formatter.info_line(logger, message, fields, time.time())
        with self._guard:
            self._add(line, at_once=False)

    def _add(self, line: str, *, at_once: bool) -> None:
        self._pending.append(line)
        self._size += len(line)
        if at_once or self._size >= BATCH or not self.batching:
            self._write()
            return
        scheduled = self._loop
        if scheduled is not None and not scheduled.is_closed():
            return  # the timer will write it
        try:
            loop = asyncio.get_running_loop()
            loop.call_later(LINGER, self._flush_scheduled)
        except RuntimeError:  # no loop running here, or it is closing
            self._write()
            return
        self._loop = loop

    def _flush_scheduled(self) -> None:
        with self._guard:
            self._loop = None
            self._write()

    def flush(self) -> None:
        with self._guard:
            self._write()

    def _write(self) -> None:
        pending = self._pending
        if not pending:
            self.stream.flush()
            return
        self._pending = []
        self._size = 0
        text = "\n".join(pending) + "\n"
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:  # a closed or broken stderr must not break the exchange
            pass


LINGER: Final = 0.05  # seconds an info line may wait to be written with others
BATCH: Final = 65536  # characters waiting that are written at once


def configure(
    level: int | str = logging.INFO, always: Mapping[str, Any] | None = None, form: str = "json"
) -> None:
    """Log lines at `level` (a number, or a level's name: "info", "warning"...) and above to
    stderr, in `form`: "json", "console" (gateway.log_console), or "auto" (console when stderr
    is a terminal)."""
    # The logging HOWTO's optimizations: no caller frame lookup, no thread or process names
    # gathered per record; the lines never carry them.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    if isinstance(level, str):
        level = logging.getLevelNamesMapping()[level.upper()]
    handler = LoopBatchedHandler(sys.stderr, batching=False)
    if form == "console" or (form == "auto" and _is_terminal(sys.stderr)):
        from gateway.log_console import ConsoleFormatter

        handler.setFormatter(ConsoleFormatter(always))
    else:
        handler.setFormatter(JsonFormatter(always))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log would repeat each exchange without the audit fields
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced, or closed
        return False


def batch_lines() -> None:
    """From now on, info lines are written in batches (a serving process, once it listens:
    before, a line must not come after a plain line printed later, such as `listening on`)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, LoopBatchedHandler):
            handler.batching = True


def info_fields(logger: logging.Logger, message: str, fields: bytes) -> None:
    """`logger.info(message, extra={FIELDS: fields})`: the exchange's line, every exchange. When
    the only handler is the root's LoopBatchedHandler with a JsonFormatter (`configure`), the
    line goes to it directly; else (a test capturing logs, another setup) through logging."""
    if not logger.isEnabledFor(logging.INFO):
        return
    handlers = logging.root.handlers
    handler = handlers[0] if len(handlers) == 1 else None
    if (
        type(handler) is LoopBatchedHandler
        and type(handler.formatter) is JsonFormatter
        and logger.propagate
        and not logger.handlers
        and logger.parent is logging.root
        and not logger.filters
        and not logging.root.filters
        and not handler.filters
    ):
        handler.info(logger.name, message, fields)
        return
    logger.info(message, extra={FIELDS: fields})
