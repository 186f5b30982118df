"""What the lean HTTP path (gateway.lean_http) knows of one request: its head, read with
httptools' callbacks, and the `LeanRequest` its handler gets.

A head stays on the lean path when it is the common kind (see gateway.lean_http); `LeanHead`
notes, field by field, whether it still is. A `LeanRequest` is handed to its handler as soon as
its head is read: its body is there already when it came with the head (the common case), else
`read()` waits until the connection has it all (`arrived`). A handler that answers without
reading it (a 401 for a missing gateway key) answers before the body was sent at all.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import cast

from aiohttp import hdrs, web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http import HttpVersion11
from aiohttp.http_writer import StreamWriter
from multidict import CIMultiDictProxy

from gateway.client_request import ClientRequest

# A route's handler wrapped in the app's middlewares, as the lean path calls it.
Handler = Callable[[ClientRequest], Awaitable[web.StreamResponse]]

# Fields that take a request off the lean path: aiohttp decodes, de-chunks, answers 100-continue.
OFF_PATH = frozenset((b"content-encoding", b"transfer-encoding", b"expect", b"upgrade"))


def lean_routes(app: web.Application) -> dict[str, Handler]:
    """The app's plain (no variable part) POST routes, each wrapped in the app's middlewares in
    aiohttp's order (the first listed is the outermost)."""
    routes: dict[str, Handler] = {}
    for resource in app.router.resources():
        if not isinstance(resource, web.PlainResource):
            continue
        for route in resource:
            if route.method != hdrs.METH_POST:
                continue
            handler = route.handler
            for middleware in reversed(app.middlewares):
                handler = functools.partial(middleware, handler=handler)
            # What the app's LEAN_POSTS mark says: its plain POST handlers read a request only
            # through gateway.client_request.ClientRequest, which LeanRequest is.
            routes[resource.canonical] = cast(Handler, handler)
    return routes


class LeanRequest:
    """A `ClientRequest` (what the app's POST endpoints read of a request), and what aiohttp's
    `StreamResponse.prepare` reads of one."""

    __slots__ = (
        "_arrived",
        "_body",
        "_protocol",
        "_writer",
        "client_max_size",
        "content_length",
        "headers",
        "keep_alive",
        "path",
    )

    method = hdrs.METH_POST
    version = HttpVersion11

    def __init__(
        self,
        protocol: BaseProtocol,
        path: str,
        headers: CIMultiDictProxy[str],
        length: int,
        body: bytes | None,
        keep_alive: bool,
        client_max_size: int,
    ) -> None:
        self._protocol = protocol
        self._body = body  # None: still arriving
        self._arrived: asyncio.Future[bytes] | None = None  # what read() waits on meanwhile
        self._writer: StreamWriter | None = None
        self.path = path
        self.headers = headers
        self.keep_alive = keep_alive
        self.content_length = length
        self.client_max_size = client_max_size

    @property
    def body_exists(self) -> bool:
        return self.content_length > 0

    @property
    def body_unread(self) -> bool:
        """Whether the body has not all arrived yet."""
        return self._body is None

    @property
    def transport(self) -> asyncio.Transport | None:
        return self._protocol.transport

    async def read(self) -> bytes:
        if self._body is None:
            self._arrived = self._protocol._loop.create_future()
            self._body = await self._arrived
        return self._body

    def arrived(self, body: bytes) -> None:
        """The connection has the whole body."""
        waiting = self._arrived
        if waiting is None:
            self._body = body
        elif not waiting.done():  # not cancelled with its handler
            waiting.set_result(body)

    @property
    def _payload_writer(self) -> StreamWriter:
        """aiohttp's writer, for a response that is streamed (StreamResponse.prepare)."""
        if self._writer is None:
            self._writer = StreamWriter(self._protocol, self._protocol._loop)
        return self._writer

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        """StreamResponse.prepare's hook: the app has no on_response_prepare signal."""


class LeanHead:
    """httptools' callbacks for one request head: whether it stays on the lean path, and what
    the handler needs of it."""

    __slots__ = (
        "fields",
        "keep_alive",
        "lean",
        "length",
        "limit",
        "max_field",
        "max_headers",
        "path",
        "start",
        "url",
    )

    def __init__(self, max_field: int, max_headers: int, limit: int) -> None:
        self.fields: list[tuple[str, str]] = []
        self.url = b""
        self.length = -1
        self.lean = True
        self.max_field = max_field
        self.max_headers = max_headers
        self.limit = limit
        self.start = 0  # where the body begins, once the head is read
        self.path = ""
        self.keep_alive = True

    def on_url(self, url: bytes) -> None:
        self.url += url
        if len(self.url) > self.max_field:
            self.lean = False

    def on_header(self, name: bytes, value: bytes) -> None:
        fields = self.fields
        if len(name) + len(value) + 2 > self.max_field or len(fields) >= self.max_headers:
            self.lean = False
            return
        lower = name.lower()
        if lower == b"content-length":
            if self.length >= 0 or not value.isdigit():
                self.lean = False
                return
            self.length = int(value)
            if self.length > self.limit:
                self.lean = False
        elif lower in OFF_PATH:
            self.lean = False
        fields.append(
            (name.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape"))
        )
