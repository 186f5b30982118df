"""The load generator's HTTP/1.1 client: one request at a time per keep-alive connection.

A raw `asyncio.Protocol` with httptools parsing the answer, because at concurrency 1 the
client's own cost is part of every latency it reports, and aiohttp's client costs more than
the fake upstream answering. The request is encoded once per job (`Request.from_job`); per
request the connection keeps a few timestamps and looks for the bytes that end a complete
answer (a stream's terminator, `[DONE]`, `message_stop`, ...; a whole answer's stop value)
in what arrives, keeping only as much of the previous read as a marker split across two reads
needs. For a stream it also notes when the first content word arrives (`FIRST_TOKEN`): the time
to first token, after the events that open a stream and carry no text.

    connection = await connect(request)
    status, ttfb, latency, ended, ttft = await connection.send(request.data)
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, cast

import httptools

from gateway_bench.wires import WIRES

# status, time to first byte, latency, ended, time to first token (0.0: none seen)
Outcome = tuple[int, float, float, bool, float]

# The first content word every answer of the fake upstream starts with
# (`gateway_bench.scenario.words`): a streamed answer's time to first token is when it arrives.
FIRST_TOKEN = b"Hello"


class RequestFailed(Exception):
    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Request:
    """One job's request, encoded once: the bytes to write and the bytes that end its answer."""

    host: str
    port: int
    data: bytes
    marker: bytes
    stream: bool

    @classmethod
    def from_job(cls, job: dict[str, Any]) -> Request:
        wire = WIRES[job["wire"]]
        stream = bool(job.get("stream"))
        body = wire.body(job["model"], stream, int(job.get("history_bytes", 0)))
        host, port = job["host"], int(job["port"])
        headers = {**wire.headers, **job.get("headers", {})}
        lines = [
            f"POST {job['path']} HTTP/1.1",
            f"host: {host}:{port}",
            "content-type: application/json",
            f"content-length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        return cls(host, port, data, wire.terminator if stream else wire.ended, stream)


class Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self, marker: bytes) -> None:
        self._marker = marker
        self._keep = max(len(marker), len(FIRST_TOKEN), 2) - 1  # a marker split across reads
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = True
        self.timed_out = False
        self.started = 0.0  # when the current request was written; 0 when idle
        self.finished = False  # a held stream's answer ended (it should not)
        self._waiter: asyncio.Future[Outcome] | None = None
        self._first: asyncio.Future[float] | None = None
        self._status = 0
        self._ttfb = 0.0
        self._ttft = 0.0
        self._ended = False
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail("timeout" if self.timed_out else "connection closed")

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail("malformed answer")
            if self.transport is not None:
                self.transport.abort()

    def send(self, data: bytes) -> asyncio.Future[Outcome]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._start(data)
        return self._waiter

    def open_stream(self, data: bytes) -> asyncio.Future[float]:
        """Send a request whose answer is expected to stay open; the future is its first byte."""
        assert self.transport is not None
        self._first = asyncio.get_running_loop().create_future()
        self._start(data)
        return self._first

    def _start(self, data: bytes) -> None:
        assert self.transport is not None
        self._status, self._ttfb, self._ttft, self._ended, self._tail = 0, 0.0, 0.0, False, b""
        self.started = time.perf_counter()
        self.transport.write(data)

    def _fail(self, kind: str) -> None:
        self.started = 0.0
        for future in (self._waiter, self._first):
            if future is not None and not future.done():
                future.set_exception(RequestFailed(kind))
        self._waiter = self._first = None

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if not self._ttfb:
            self._ttfb = time.perf_counter()
            if self._first is not None and not self._first.done():
                self._first.set_result(self._ttfb - self.started)
        if not self._ended:
            window = self._tail + body if self._tail else body
            if not self._ttft and FIRST_TOKEN in window:
                self._ttft = time.perf_counter()
            if self._marker in window:
                self._ended = True
            else:
                self._tail = window[-self._keep :]

    def on_message_complete(self) -> None:
        end = time.perf_counter()
        started, self.started = self.started, 0.0
        self.keep_alive = self._parser.should_keep_alive()
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            self.finished = True
            return
        ttfb = (self._ttfb or end) - started
        ttft = self._ttft - started if self._ttft else 0.0
        if not waiter.done():
            waiter.set_result((self._status, ttfb, end - started, self._ended, ttft))


async def connect(request: Request) -> Connection:
    loop = asyncio.get_running_loop()
    _, connection = await loop.create_connection(
        lambda: Connection(request.marker), request.host, request.port
    )
    return connection
