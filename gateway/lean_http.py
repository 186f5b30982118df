"""The exchanges' own HTTP/1.1 path: the common POST served without aiohttp's request machinery.

aiohttp's server costs more CPU per request than the rest of a proxied request's HTTP work: a
bare proxy (one POST route relaying to the bench's upstream with `providers.http`) took 0.13-0.14
ms of CPU per request at concurrency 32 on aiohttp's server and 0.06-0.08 ms on a protocol over
httptools; 0.26-0.28 and 0.15-0.17 ms at concurrency 1, and ~0.1 ms less latency. Its request
parsing (a URL object, a stream reader per body), a task to start and join per request, the
request and response objects and their header preparation make the difference.

Every connection starts on a `LeanConnection`. A request whose head is the common kind is served
here: POST, HTTP/1.1, a path that is one of the app's plain POST routes (a query string is
allowed, percent-escapes are not), a Content-Length body within the app's `client_max_size`, no
Content-Encoding, Transfer-Encoding, Expect or Upgrade field, within the parser limits. Its head
is parsed with httptools, its handler (wrapped in the app's middlewares, as aiohttp would) gets a
`LeanRequest`, and a whole `web.Response` goes out in one write; a streamed `web.StreamResponse`
writes through aiohttp's own StreamWriter. The handler starts once the head is read: a body
still arriving is waited for by `LeanRequest.read()`, so what is refused on the head (a missing or
unknown gateway key: 401) is answered before the body is sent. Such an answer says
`Connection: close`, and the connection then reads (and drops) the rest of the declared body, for
aiohttp's `lingering_time` at most, before it closes: the client that is still sending sees its
answer instead of a reset.

The first request that is anything else hands the connection, from that request's first byte
on, to aiohttp's `EdgeRequestHandler` for good (gateway.edge): a refused head, a compressed or
chunked body, a GET, an upgrade get aiohttp's behaviour and the edge's error formats, unchanged.

Like gateway.edge, this reads a few of aiohttp's internals, as of aiohttp 3.14: BaseProtocol's
flow-control state, the server's connection registry, `_serialize_headers`, a Response's body,
compression, chunking and cookies. tests/test_lean_http.py and the suite, every exchange of which
takes this path, fail if one of them changes.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Mapping
from typing import Any, Protocol, cast

import httptools
from aiohttp import hdrs, web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.helpers import rfc822_formatted_time
from aiohttp.http import SERVER_SOFTWARE
from aiohttp.http_writer import _serialize_headers
from aiohttp.tcp_helpers import tcp_keepalive
from multidict import CIMultiDict, CIMultiDictProxy

from gateway.lean_request import Handler, LeanHead, LeanRequest

log = logging.getLogger("gateway.edge")

# A head longer than this is not looked for here: aiohttp gets the connection (its limits apply).
HEAD_LIMIT = 32 * 1024
# Bytes a client may send ahead (pipelined) while a request is served, before reading pauses.
AHEAD_LIMIT = 1024 * 1024
_KEEPALIVE = 3630.0  # seconds: aiohttp's RequestHandler default
_LINGERING = 10.0  # seconds: aiohttp's RequestHandler default


class LeanServer(Protocol):
    """What a lean connection needs of its server (gateway.edge.EdgeServer): aiohttp's
    connection registry, its handler's arguments and the head limits, and the aiohttp handler a
    connection is handed over to."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def handler_kwargs(self) -> Mapping[str, Any]: ...

    # (max_field_size, max_headers, client_max_size): what a lean request's head must keep within
    @property
    def lean_limits(self) -> tuple[int, int, int]: ...

    def connection_made(self, handler: Any, transport: asyncio.Transport) -> None: ...

    def connection_lost(self, handler: Any, exc: BaseException | None) -> None: ...

    def aiohttp_handler(self) -> asyncio.Protocol: ...


class LeanConnection(BaseProtocol):
    """One client connection: lean requests served here, one at a time, until a request that is
    not hands the connection to aiohttp (`_hand_over`)."""

    __slots__ = (
        "_awaited",
        "_closing",
        "_draining",
        "_idle",
        "_keepalive",
        "_last_active",
        "_manager",
        "_pending",
        "_routes",
        "_task_handler",
    )

    def __init__(self, manager: LeanServer, routes: Mapping[str, Handler]) -> None:
        super().__init__(manager.loop)
        self._manager: LeanServer | None = manager
        self._routes = routes
        self._pending: bytes | bytearray = b""  # received, not yet taken by a request
        # The request being served whose body is still arriving, and where in `_pending` that
        # body begins and ends.
        self._awaited: tuple[LeanRequest, int, int] | None = None
        # The body bytes still to drop after an answer sent before its body came; -1: none.
        self._draining = -1
        # The request being served; by aiohttp's name for it: its server defers forgetting a
        # lost connection until this task is done.
        self._task_handler: asyncio.Task[None] | None = None
        self._keepalive = float(manager.handler_kwargs.get("keepalive_timeout", _KEEPALIVE))
        self._closing = False
        self._idle: asyncio.TimerHandle | None = None
        self._last_active = 0.0

    # --- connection events --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        tcp_keepalive(cast(asyncio.Transport, transport))  # as aiohttp's handler does
        assert self._manager is not None
        self._manager.connection_made(self, cast(asyncio.Transport, transport))
        self._last_active = self._loop.time()
        if self._keepalive > 0:
            self._idle = self._loop.call_later(self._keepalive, self._check_idle)

    def data_received(self, data: bytes) -> None:
        if self._manager is None:
            return
        if self._draining >= 0:
            self._drain(len(data))
            return  # answered already: the rest of its body is dropped
        if self._pending:
            pending = self._pending
            if type(pending) is bytes:
                pending = bytearray(pending)
            pending += data
            self._pending = pending
        else:
            self._pending = data
        if self._awaited is not None:
            self._deliver()
        elif self._task_handler is None and not self._paused:
            self._advance()
        elif len(self._pending) > AHEAD_LIMIT and not self._reading_paused:
            # Sent ahead of an answer still being made or not yet read by the client: wait.
            self._reading_paused = True
            self._pause_transport_reading()

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        manager, self._manager = self._manager, None
        if manager is None:
            return  # handed over: the connection was aiohttp's
        manager.connection_lost(self, exc)
        if self._task_handler is not None:
            self._task_handler.cancel()  # the client left: its exchange ends (handler cancellation)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._task_handler is None and self._manager is not None:
            self._advance()

    # --- requests -----------------------------------------------------------------------------

    def _advance(self) -> None:
        """Start the next request there is, or hand the connection over."""
        if self._paused or self._closing:
            return  # the client is not reading what it was sent; or the server stops
        pending = self._pending
        if not pending:
            return
        if self._reading_paused:
            self._reading_paused = False
            self._resume_transport_reading()
        end = pending.find(b"\r\n\r\n")
        if end < 0:
            if len(pending) > HEAD_LIMIT:
                self._hand_over()
            return
        head = self._read_head(pending, end + 4)
        if head is None:
            self._hand_over()
            return
        headers = CIMultiDictProxy(CIMultiDict(head.fields))
        end = head.start + head.length
        body: bytes | None = None
        if len(pending) >= end:  # the common case: the body came with its head
            body = bytes(pending[head.start : end])
            self._pending = pending[end:] if len(pending) > end else b""
        request = LeanRequest(
            self, head.path, headers, head.length, body, head.keep_alive, head.limit
        )
        if body is None:
            self._awaited = (request, head.start, end)
        self._task_handler = self._loop.create_task(self._respond(request, self._routes[head.path]))

    def _deliver(self) -> None:
        """The awaited body, once it has all arrived."""
        assert self._awaited is not None
        request, start, end = self._awaited
        pending = self._pending
        if len(pending) < end:
            return
        self._awaited = None
        request.arrived(bytes(pending[start:end]))
        self._pending = pending[end:] if len(pending) > end else b""

    def _read_head(self, pending: bytes | bytearray, size: int) -> LeanHead | None:
        """The head of `size` bytes, when it stays on this path."""
        manager = self._manager
        assert manager is not None
        limits = manager.lean_limits
        parsed = LeanHead(limits[0], limits[1], limits[2])
        parser = httptools.HttpRequestParser(parsed)
        try:
            parser.feed_data(bytes(pending[:size]))
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            return None  # aiohttp refuses it in the client's format (gateway.edge)
        if (
            not parsed.lean
            or parsed.length < 0
            or parser.get_method() != b"POST"
            or parser.get_http_version() != "1.1"
        ):
            return None
        url = parsed.url
        path_bytes = url.partition(b"?")[0]
        if path_bytes.find(b"%") >= 0 or url.find(b"#") >= 0:  # not `in` (gateway.formats.sse)
            return None
        parsed.path = path_bytes.decode("latin-1")
        if parsed.path not in self._routes:
            return None
        parsed.start = size
        parsed.keep_alive = parser.should_keep_alive()
        return parsed

    async def _respond(self, request: LeanRequest, handler: Handler) -> None:
        try:
            try:
                response = await handler(request)
            except web.HTTPException as exc:  # what the app's middlewares let through
                response = exc
            if request.body_unread:
                request.keep_alive = False  # answered before its body came: `Connection: close`
            if type(response) is web.Response and not response.prepared and _plain(response):
                keep_alive = self._write_whole(request, response)
            else:  # streamed (and ended) by its handler, or one aiohttp must prepare
                # What StreamResponse.prepare reads of a request, LeanRequest has.
                await response.prepare(cast(web.BaseRequest, request))
                await response.write_eof()
                keep_alive = request.keep_alive and response.keep_alive is not False
        except (asyncio.CancelledError, ConnectionError):
            keep_alive = False  # the client left (or the shutdown ended the exchange)
        except Exception as exc:  # below the app's middlewares: what was sent is unknown
            frames = "".join(traceback.format_tb(exc.__traceback__))
            log.error("unhandled %s below the app\n%s", type(exc).__name__, frames)
            keep_alive = False
        finally:
            self._task_handler = None
        transport = self.transport
        if transport is None:
            return
        if self._awaited is not None:
            self._linger()
            return
        if not keep_alive or self._closing:
            transport.close()
            return
        self._last_active = self._loop.time()
        self._advance()

    # --- an answer before its body: the rest of the body is dropped, then the connection closed -

    def _linger(self) -> None:
        """Drop the rest of the declared body as it comes, then close; close after aiohttp's
        lingering time whatever is left (a client that never sends it)."""
        assert self._awaited is not None and self._manager is not None
        _, _, end = self._awaited
        self._awaited = None
        left = end - len(self._pending)
        self._pending = b""
        if self._reading_paused:
            self._reading_paused = False
            self._resume_transport_reading()
        self._draining = 0
        if left > 0 and not self._closing:
            self._draining = left
            lingering = float(self._manager.handler_kwargs.get("lingering_time", _LINGERING))
            self._loop.call_later(lingering, self._close_now)
        self._drain(0)

    def _drain(self, received: int) -> None:
        self._draining = max(0, self._draining - received)
        if self._draining == 0:
            self._close_now()

    def _close_now(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _write_whole(self, request: LeanRequest, response: web.Response) -> bool:
        """The response's head and body in one write; whether the connection stays open."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        body = cast(bytes, response.body)
        headers = response.headers
        headers[hdrs.CONTENT_LENGTH] = str(len(body))
        if hdrs.DATE not in headers:
            headers[hdrs.DATE] = rfc822_formatted_time()
        headers.setdefault(hdrs.SERVER, SERVER_SOFTWARE)
        if body:
            headers.setdefault(hdrs.CONTENT_TYPE, "application/octet-stream")
        keep_alive = request.keep_alive and response.keep_alive is not False and not self._closing
        if not keep_alive:
            headers[hdrs.CONNECTION] = "close"
        status_line = f"HTTP/1.1 {response.status} {response.reason}"
        transport.write(_serialize_headers(status_line, headers) + body)
        return keep_alive

    # --- handing over, idling, stopping --------------------------------------------------------

    def _hand_over(self) -> None:
        """aiohttp's handler takes the connection from the current request's first byte on."""
        manager, transport = self._manager, self.transport
        assert manager is not None and transport is not None
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        manager.connection_lost(self, None)
        self._manager = None
        handler = manager.aiohttp_handler()
        data, self._pending = self._pending, b""
        transport.set_protocol(handler)
        handler.connection_made(transport)
        if self._reading_paused:
            self._reading_paused = False
            self._resume_transport_reading()
        handler.data_received(bytes(data))

    def _check_idle(self) -> None:
        """Close a connection idle for the keep-alive timeout; one timer per connection, moved
        on when it fires early (requests only note the time)."""
        self._idle = None
        if self._manager is None or self.transport is None:
            return
        due = self._last_active + self._keepalive
        now = self._loop.time()
        if self._waiting() and now >= due:  # a head still arriving too, as aiohttp does
            self.transport.close()
            return
        self._idle = self._loop.call_at(max(due, now + 1.0), self._check_idle)

    def close(self) -> None:
        """The server stops: an idle connection closes now, a busy one after its answer."""
        self._closing = True
        if self._waiting() and self.transport is not None:
            self.transport.close()

    def _waiting(self) -> bool:
        """Whether no request is being served, or the one that is still waits for its body (as
        for a head still arriving, closing the connection ends it: its handler is cancelled)."""
        return self._task_handler is None or self._awaited is not None

    async def shutdown(self, timeout: float | None = 15.0) -> None:
        """Let the request being served finish within `timeout`, then end it; close."""
        self._closing = True
        task = self._task_handler
        if task is not None and not task.done() and self._awaited is None:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=timeout)
        if self.transport is not None:
            self.transport.close()


def _plain(response: web.Response) -> bool:
    """A response this path writes itself: a bytes body, nothing aiohttp would add or change."""
    return (
        type(response._body) is bytes
        and not response._compression
        and not response._chunked
        and not response._cookies
        and response.status >= 200
        and response.status not in (204, 304)
    )
