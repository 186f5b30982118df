"""One keep-alive HTTP/1.1 connection to an upstream: asyncio's protocol API and httptools'
response parser (llhttp, the parser uvicorn uses).

The gateway's upstream client is this and `providers.http_pool`, not aiohttp's client: measured
on this machine, aiohttp's per-request machinery (ClientRequest and ClientResponse objects, the
connector, the payload registry, trace and cookie hooks) cost about 110 us of CPU per proxied
request at concurrency 32 and 185 us at concurrency 1, more than all of the gateway's own work.
Here a request is one write of a pre-built head and the body, and a response is parsed by
callbacks straight into a `ResponseBody`: one list append and at most one future woken per read.

    conn.request(head, body)           # head: request line and header fields, ending in CRLF CRLF
    status, raw_headers, body = await conn.head   # raises UpstreamClosed / UpstreamBadResponse
    chunk = body.take() ...            # what arrived; `await body.wait()` for more

A connection serves one request at a time (no pipelining). When a response ends it is handed back
to its pool (`on_idle`) if both sides keep it alive; when it closes, the pool forgets it
(`on_lost`). A body whose reader falls behind pauses reading from the socket (`HIGH_WATER`), so a
slow client never makes the gateway buffer an upstream's whole answer.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import Final, cast

import httptools

# Buffered body bytes at which the socket stops being read until the reader takes them.
HIGH_WATER: Final = 256 * 1024

RawHeaders = list[tuple[bytes, bytes]]
Head = tuple[int, RawHeaders, "ResponseBody"]  # status, header fields, the body to come


class UpstreamClosed(ConnectionError):
    """The upstream closed the connection (a FIN or an RST) before its response was complete.
    A body that ended properly but lacks its wire's terminator is not this: the wire's decoder
    says so (a `missing_terminator` cut, where this one is `connection_lost`)."""


class UpstreamBadResponse(ConnectionError):
    """The upstream's bytes are not a valid HTTP/1.1 response (or its content encoding)."""


class ResponseBody:
    """A response body as it arrives: chunks taken by the reader, with a wake-up per wait."""

    __slots__ = (
        "_chunks",
        "_conn",
        "_inflate",
        "_paused",
        "_size",
        "_waiter",
        "_whole",
        "done",
        "error",
        "received",
    )

    def __init__(self, conn: UpstreamConnection, inflate: zlib._Decompress | None) -> None:
        self._conn = conn
        self._inflate = inflate
        self._chunks: list[bytes] = []
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._whole = False  # read to its end in one piece: never paused, woken at the end only
        self.received = 0  # raw bytes taken in: progress, for the idle timeout
        self.done = False  # the whole body arrived
        self.error: BaseException | None = None  # why it will not

    def feed(self, data: bytes) -> None:
        self.received += len(data)
        if self._inflate is not None:
            try:
                data = self._inflate.decompress(data)
            except zlib.error:
                self._conn.broken(UpstreamBadResponse("content encoding"))
                return
            if not data:
                return
        self._chunks.append(data)
        if self._whole:
            return
        self._size += len(data)
        self._wake()
        if self._size > HIGH_WATER and not self._paused:
            self._paused = True
            self._conn.pause_reading()

    def finish(self) -> None:
        if self._inflate is not None:
            rest = self._inflate.flush()
            if rest:
                self._chunks.append(rest)
        self.done = True
        self._wake()

    def fail(self, error: BaseException) -> None:
        if not self.done and self.error is None:
            self.error = error
            self._wake()

    @property
    def ready(self) -> bool:
        """Whether a `take` or the body's end is there without waiting."""
        return bool(self._chunks) or self.done or self.error is not None

    def take(self) -> bytes:
        """Everything that arrived since the last take (b"" when nothing did)."""
        chunks = self._chunks
        if not chunks:
            return b""
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._chunks = []
        self._size = 0
        if self._paused:
            self._paused = False
            self._conn.resume_reading()
        return data

    async def wait(self) -> None:
        """Until more arrived, the body ended, or it failed."""
        if self.ready:
            return
        await self._wait()

    async def wait_end(self) -> None:
        """Until the body ended or failed; what arrives meanwhile is kept whole, unpaused."""
        self._whole = True
        if self._paused:
            self._paused = False
            self._conn.resume_reading()
        while not (self.done or self.error is not None):
            await self._wait()

    async def _wait(self) -> None:
        waiter = self._waiter = self._conn.loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


_INFLATE: Final[dict[bytes, Callable[[], zlib._Decompress]]] = {
    b"gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    b"x-gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    b"deflate": lambda: zlib.decompressobj(32 + zlib.MAX_WBITS),  # zlib-wrapped or gzip
}


class UpstreamConnection(asyncio.Protocol):
    """One connection; `request` starts an exchange on it, `head` resolves with its response."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        key: object,
        on_idle: Callable[[UpstreamConnection], None],
        on_lost: Callable[[UpstreamConnection], None],
    ) -> None:
        self.loop = loop
        self.key = key  # the pool's key of the origin it is connected to
        self._on_idle = on_idle
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._raw: RawHeaders = []
        self._informational = False
        self._until_close = False
        self.head: asyncio.Future[Head] | None = None
        self.body: ResponseBody | None = None
        self.busy = False  # a request was sent and its response is not complete
        self.closed = False
        self.idle_since = 0.0
        self.reused = 0  # requests sent on it before the current one

    # --- the exchange -------------------------------------------------------------------------

    def request(self, head: bytes, body: bytes) -> asyncio.Future[Head]:
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            raise UpstreamClosed()
        assert not self.busy
        self.busy = True
        self._raw = []
        future = self.head = self.loop.create_future()
        if len(body) < 16384:
            transport.write(head + body)
        else:
            transport.writelines((head, body))  # no copy of a large body
        return future

    def abort(self) -> None:
        """Drop the connection at once (a response left unread cannot be followed by another)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def broken(self, error: BaseException) -> None:
        """The response cannot be read on: it fails with `error` and the connection is dropped."""
        self._fail(error)
        self.abort()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream transport (uvloop's too)

    def data_received(self, data: bytes) -> None:
        if not self.busy:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted
            return
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self.broken(UpstreamBadResponse(type(exc).__name__))

    def eof_received(self) -> bool | None:
        return None  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.transport = None
        body = self.body
        if body is not None and not body.done and self._until_close and exc is None:
            self._complete(keep=False)  # a body delimited by the connection's end is whole
        elif self.busy:
            self._fail(UpstreamClosed())
        self._on_lost(self)

    # --- httptools callbacks ------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._raw.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200 and status != 101:
            self._informational = True  # 1xx (103 Early Hints): the real response follows
            self._raw = []
            return
        inflate = None
        length = chunked = False
        for name, value in self._raw:
            lower = name.lower()
            if lower == b"content-length":
                length = True
            elif lower == b"transfer-encoding":
                chunked = value.lower().find(b"chunked") >= 0
            elif lower == b"content-encoding":
                make = _INFLATE.get(value.strip().lower())
                inflate = make() if make is not None else None
        self._until_close = not (length or chunked) and status not in (204, 304)
        body = self.body = ResponseBody(self, inflate)
        head = self.head
        if head is not None and not head.done():
            head.set_result((status, self._raw, body))

    def on_body(self, data: bytes) -> None:
        body = self.body
        if body is not None:
            body.feed(data)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        self._complete(keep=self._parser.should_keep_alive())

    # --- ends ---------------------------------------------------------------------------------

    def _complete(self, *, keep: bool) -> None:
        body = self.body
        self.busy = False
        self.body = None
        self.head = None
        if body is not None:
            body.finish()
        if keep and not self.closed:
            self.reused += 1
            self.idle_since = self.loop.time()
            self._on_idle(self)
        else:
            self.close()

    def _fail(self, error: BaseException) -> None:
        self.busy = False
        head, body = self.head, self.body
        self.head = self.body = None
        if head is not None and not head.done():
            head.set_exception(error)
        elif body is not None:
            body.fail(error)
