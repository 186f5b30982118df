"""The HTTP edge: what the server refuses before a handler could, in the client's own format.

Two things aiohttp does on its own, below the application and its middlewares:

- It answers a request its parser refuses (a request line or header field over its limits, too
  many header fields, malformed syntax, a Content-Encoding it cannot decode) with a plain-text
  400 whose text can quote the offending bytes: a client's key, when the long header was
  `authorization`. `make_runner` serves the app through `EdgeRequestHandler`, whose
  `handle_error` answers instead in the called endpoint's error format (the path and the
  `anthropic-version` header are read from the request's first bytes, kept until its head is
  parsed: the refused request never reached the router), with 431 for header fields over the
  limit, 400 otherwise (a request line over it included: see RequestLineTooLong), a fresh
  `x-request-id`, and a log line naming only the exception class.
- It keeps a connection open after an answer sent before the request's body was read (a 401
  for a missing gateway key, a 413 for a declared length over the limit), reading and dropping
  the rest for its lingering time. The edge marks such an answer `Connection: close`: the body
  was not read, so nothing after it on the connection can be trusted to be the next request.

(A body aiohttp inflates is read within the limit by gateway.request_body.read_body.)

`gateway serve` and the test stack both serve the app with `make_runner(app, **runner_kwargs)`,
which takes the parser's header limits from the app (`HTTP_LIMITS`, from `[limits]`); the format
of a refused request is found as for any request outside an endpoint
(`gateway.client_formats.detect`).

aiohttp has no public hook for its parser's refusals (aio-libs/aiohttp#3287 is open): this
subclasses its RequestHandler, Server and AppRunner and reads a few of their attributes
(`_request_count`, `_messages`, `Server._kwargs`, `AppRunner._make_server`), as of aiohttp 3.14;
tests/test_http_edge.py fails if any of them changes.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import http_parser, web
from aiohttp.http_exceptions import (
    ContentEncodingError,
    HttpProcessingError,
    LineTooLong,
    PayloadEncodingError,
)
from aiohttp.web_protocol import RequestHandler
from multidict import CIMultiDict

from gateway.client_formats import DEFAULT_FORMAT, ClientFormat, detect
from gateway.errors import (
    GatewayError,
    HeaderFieldsTooLarge,
    MalformedHTTP,
    RequestLineTooLong,
)
from gateway.lean_http import LeanConnection
from gateway.lean_request import Handler, lean_routes
from gateway.request_ids import new_request_id

log = logging.getLogger("gateway.edge")

# The first bytes of a request kept until its head is parsed: enough for a request line at
# aiohttp's limit (8190) and the usual headers before an oversized one.
HEAD_CAPTURE = 32 * 1024
METHODS = frozenset(b"GET HEAD POST PUT DELETE PATCH OPTIONS TRACE CONNECT".split())
VERSIONS = frozenset((b"HTTP/1.0", b"HTTP/1.1"))
_MESSAGES = (http_parser.RawRequestMessage, http_parser.RawRequestMessagePy)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The HTTP parser's limits (`[limits] max_header_bytes`, `max_headers`)."""

    max_field_size: int = 8190  # one header field; also the request line (max_line_size)
    max_headers: int = 128


HTTP_LIMITS = web.AppKey("http_limits", HttpLimits)
# Set on an app whose plain POST handlers read a request only through
# `gateway.client_request.ClientRequest`: its runner serves them on the lean path. Other apps
# (the tests' upstreams) stay on aiohttp's.
LEAN_POSTS = web.AppKey("lean_posts", bool)


# --- what the HTTP parser refuses ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Head:
    """The parsed request line of a refused request, and its complete header lines' names."""

    path: str
    headers: CIMultiDict[str]  # names only: values are never kept
    field_count: int


def _read_head(raw: bytes, max_line_size: int) -> _Head | None:
    """The request line and header names, or None when the request line was not parsed."""
    line, crlf, rest = raw.partition(b"\r\n")
    if not crlf or len(line) > max_line_size:
        return None
    parts = line.split(b" ")
    if len(parts) != 3 or parts[0] not in METHODS or parts[2] not in VERSIONS:
        return None
    try:
        path = urlsplit(parts[1].decode("latin-1")).path
    except ValueError:
        return None
    names: CIMultiDict[str] = CIMultiDict()
    count = 0
    for field in rest.split(b"\r\n")[:-1]:  # the last piece is not a complete line
        if not field:
            break  # the end of the head
        count += 1
        name, colon, _ = field.partition(b":")
        if colon:
            names.add(name.strip().decode("latin-1"), "")
    return _Head(path, names, count)


def _refusal(
    exc: HttpProcessingError, head: _Head | None, known: bool, max_headers: int
) -> GatewayError:
    """The typed error for what the parser refused; `known`: the request's first bytes are."""
    if isinstance(exc, LineTooLong):
        if known and head is None:
            return RequestLineTooLong("The request line is longer than the server accepts")
        return HeaderFieldsTooLarge("A request header field is longer than the server accepts")
    if head is not None and head.field_count > max_headers:
        return HeaderFieldsTooLarge(f"The request has more than {max_headers} header fields")
    if isinstance(exc, ContentEncodingError):
        return MalformedHTTP("The request body's Content-Encoding cannot be decoded")
    if isinstance(exc, PayloadEncodingError):
        return MalformedHTTP("The request body's framing (length or chunked encoding) is invalid")
    return MalformedHTTP("The request is not valid HTTP/1.1")


class _ServerFailure(GatewayError):
    def __init__(self, status: int) -> None:
        super().__init__("The gateway failed to handle this request")
        self.status = status if status >= 500 else 500


class EdgeRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering what it refuses in the client's error format."""

    __slots__ = ("_head", "_head_payload")

    def __init__(self, manager: EdgeServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._head: bytearray | None = bytearray()  # the current request's first bytes
        self._head_payload: Any = None  # the body of the last request whose head was parsed

    def data_received(self, data: bytes) -> None:
        head = self._head
        if head is None and (self._head_payload is None or self._head_payload.is_eof()):
            head = self._head = bytearray()  # the previous request was read whole: a new one
        if head is not None and len(head) < HEAD_CAPTURE:
            head += data[: HEAD_CAPTURE - len(head)]
        count = self._request_count
        super().data_received(data)
        parsed = self._request_count - count
        if parsed and self._messages:
            message, payload = self._messages[-1]
            if isinstance(message, _MESSAGES):
                self._head, self._head_payload = None, payload
            elif parsed > 1:
                self._head = None  # the refused request began inside this data: not known

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("a response was already sent, cannot send an error response")
        request_id = new_request_id()
        err: GatewayError
        if isinstance(exc, HttpProcessingError):
            known = self._head is not None
            head = _read_head(bytes(self._head), self.max_line_size) if self._head else None
            err = _refusal(exc, head, known, self.max_headers)
            fmt = _format(head.path, head.headers) if head is not None else DEFAULT_FORMAT
            log.info(
                "refused a request the HTTP parser could not read",
                extra={
                    "request_id": request_id,
                    "http_status": err.status,
                    "error_class": type(exc).__name__,
                },
            )
        else:
            # A failure below the app's middlewares (or a handler timeout): class and frames
            # only, exception messages can quote request data.
            frames = "".join(traceback.format_tb(exc.__traceback__)) if exc else ""
            name = type(exc).__name__ if exc else "error"
            log.error("unhandled %s below the app\n%s", name, frames)
            err = _ServerFailure(status)
            fmt = _format(request.path, request.headers)
        status, body, headers = fmt.render_error(err, request_id)
        response = web.Response(status=status, body=body, headers=headers)
        response.force_close()
        return response


def _format(path: str, headers: Mapping[str, str]) -> ClientFormat:
    try:
        return detect(path, headers)
    except Exception:  # a refusal must be answered, whatever its head holds
        return DEFAULT_FORMAT


class EdgeServer(web.Server):
    """aiohttp's low-level server, whose connections start on the lean path
    (`gateway.lean_http`) and move to an `EdgeRequestHandler` at their first request that is not
    lean; without lean routes they are `EdgeRequestHandler`s from the start."""

    lean_routes: Mapping[str, Handler] = {}
    # (max_field_size, max_headers, client_max_size): what a lean request's head must keep within
    lean_limits: tuple[int, int, int] = (8190, 128, 1024**2)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def handler_kwargs(self) -> Mapping[str, Any]:
        return self._kwargs

    def aiohttp_handler(self) -> EdgeRequestHandler:
        return EdgeRequestHandler(self, loop=self._loop, **self._kwargs)

    def __call__(self) -> asyncio.Protocol:  # type: ignore[override]
        if self.lean_routes:
            return LeanConnection(self, self.lean_routes)
        return self.aiohttp_handler()


class EdgeRunner(web.AppRunner):
    """An AppRunner whose server answers in the client's format what aiohttp refuses, and serves
    the app's plain POST routes on the lean path."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        edge = EdgeServer(
            _closing_unread(server.request_handler),
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=asyncio.get_running_loop(),
            **server._kwargs,
        )
        kwargs = server._kwargs
        if self.app.get(LEAN_POSTS):
            edge.lean_routes = lean_routes(self.app)
        edge.lean_limits = (
            min(kwargs.get("max_field_size", 8190), kwargs.get("max_line_size", 8190)),
            kwargs.get("max_headers", 128),
            self.app._client_max_size,
        )
        return edge


def _closing_unread(
    handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
    """`handler`, whose answers given before the request's body was read say `Connection:
    close` (aiohttp would otherwise keep the connection once it has dropped the rest)."""

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        response = await handler(request)
        if not response.prepared and not request.content.is_eof():
            response.force_close()
        return response

    return handle


def make_runner(app: web.Application, **kwargs: Any) -> web.AppRunner:
    """The runner to serve the gateway's app with: web.AppRunner's arguments, the HTTP edge
    above, and handler cancellation on: a client that leaves cancels its exchange at once, so the
    upstream request is closed too, even while the upstream is silent (aiohttp's default would
    notice only at the next write)."""
    kwargs.setdefault("handler_cancellation", True)
    limits = app.get(HTTP_LIMITS)
    if limits is not None:
        kwargs.setdefault("max_field_size", limits.max_field_size)
        kwargs.setdefault("max_line_size", limits.max_field_size)
        kwargs.setdefault("max_headers", limits.max_headers)
    return EdgeRunner(app, **kwargs)
