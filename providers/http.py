"""The HTTP providers' transport: POST a body, get the status and headers, read the body.

Each provider owns one `HttpTransport`: a `ConnectionPool` of keep-alive HTTP/1.1 connections
(`providers.http_pool`, `providers.http_conn`), created lazily on first use so that it binds to
the loop that serves requests. Foreign exceptions (OSError, ssl.SSLError, the connection's own)
are mapped here, once, to `gateway.errors` types; the original stays as `__cause__` for logs.
Messages name the provider, the upstream's host:port and the cause in words, classified by
exception type and errno: never the rest of the URL, a header, a key or an exception's text.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import os
import socket
import ssl
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway.errors import InvalidRequest, UpstreamError, UpstreamTimeout, UpstreamUnreachable
from providers.host_port import host_port
from providers.http_clock import AttemptClock, Watchdog
from providers.http_conn import (
    RawHeaders,
    ResponseBody,
    UpstreamBadResponse,
    UpstreamClosed,
    UpstreamConnection,
)
from providers.http_pool import DEFAULT_POOL, ConnectionPool, Origin, PoolLimits, PoolStats

__all__ = [
    "DEFAULT_POOL",
    "DEFAULT_TIMEOUTS",
    "HttpReply",
    "HttpTransport",
    "PoolLimits",
    "PoolStats",
    "Timeouts",
    "host_port",
]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds each wait of one attempt may take (None: unbounded).

    connect: TCP and TLS; first_byte: the request sent to the response's headers; idle: the gap
    between two reads of the body (a stream that keeps producing never hits it); total: the
    whole attempt, connect to the body's last byte."""

    connect: float | None = 10.0
    first_byte: float | None = 600.0
    idle: float | None = 300.0
    total: float | None = 1800.0


DEFAULT_TIMEOUTS: Final = Timeouts()

# Sent unless the provider gives its own (as aiohttp's client did before this transport).
USER_AGENT: Final = "llm-gateway"
DEFAULT_ACCEPT: Final = "*/*"
ACCEPT_ENCODING: Final = "gzip, deflate"  # what http_conn inflates
_DEFAULTED: Final = frozenset({"host", "user-agent", "accept", "accept-encoding", "authorization"})
_TARGETS_KEPT: Final = 1024  # distinct URLs whose parsed form is kept


@dataclass(frozen=True, slots=True)
class _Target:
    """A URL parsed once: where to connect, and the start of every request's head to it."""

    origin: Origin
    start: str  # "POST <path?query> HTTP/1.1\r\n"
    host: str  # the Host field's value
    authorization: str | None  # Basic credentials from the URL's user info


def _parse_target(url: str, encoded: bool) -> _Target:
    parsed = URL(url, encoded=encoded)
    scheme = parsed.scheme
    if scheme not in ("http", "https") or not parsed.raw_host:
        raise ValueError("an upstream URL is http:// or https:// with a host")
    tls = scheme == "https"
    port = parsed.explicit_port or (443 if tls else 80)
    host = parsed.raw_host
    shown = f"[{host}]" if ":" in host else host
    host_field = shown if parsed.explicit_port is None else f"{shown}:{port}"
    authorization = None
    if parsed.raw_user is not None:
        user, password = unquote(parsed.raw_user), unquote(parsed.raw_password or "")
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    path = parsed.raw_path_qs or "/"
    return _Target(Origin(host, port, tls), f"POST {path} HTTP/1.1\r\n", host_field, authorization)


def _head(target: _Target, headers: Mapping[str, str], length: int) -> bytes:
    """The request line and header fields; InvalidRequest for a field that would split it."""
    parts = [target.start]
    given: set[str] = set()
    for name, value in headers.items():
        if "\n" in value or "\r" in value or "\n" in name or "\r" in name or ":" in name:
            raise InvalidRequest(f"The header field {name[:64]!r} cannot be sent upstream")
        lower = name.lower()
        if lower == "content-length":
            continue
        if lower in _DEFAULTED:
            given.add(lower)
        parts.append(f"{name}: {value}\r\n")
    if "host" not in given:
        parts.append(f"Host: {target.host}\r\n")
    if "user-agent" not in given:
        parts.append(f"User-Agent: {USER_AGENT}\r\n")
    if "accept" not in given:
        parts.append(f"Accept: {DEFAULT_ACCEPT}\r\n")
    if "accept-encoding" not in given:
        parts.append(f"Accept-Encoding: {ACCEPT_ENCODING}\r\n")
    if target.authorization is not None and "authorization" not in given:
        parts.append(f"Authorization: {target.authorization}\r\n")
    parts.append(f"Content-Length: {length}\r\n\r\n")
    return "".join(parts).encode()


class HttpReply:
    """An `UpstreamReply` on one connection's response, applying the idle and total timeouts to
    the body. `pool_wait`: seconds the request waited for a connection (0.0: none)."""

    __slots__ = (
        "_body",
        "_clock",
        "_conn",
        "_headers",
        "_loop",
        "_provider",
        "_raw",
        "_timeouts",
        "pool_wait",
        "status",
    )

    def __init__(
        self,
        status: int,
        raw: RawHeaders,
        body: ResponseBody,
        conn: UpstreamConnection,
        provider: str,
        timeouts: Timeouts,
        clock: AttemptClock,
        pool_wait: float,
    ) -> None:
        self.status = status
        self.pool_wait = pool_wait
        self._raw = raw
        self._headers: CIMultiDictProxy[str] | None = None
        self._body = body
        self._conn = conn
        self._provider = provider
        self._timeouts = timeouts
        self._clock = clock
        self._loop = conn.loop
        clock.reading(body)

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive, built when first read (the success path never reads them)."""
        if self._headers is None:
            fields = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in self._raw)
            self._headers = CIMultiDictProxy(fields)
        return self._headers

    async def read(self) -> bytes:
        body, clock = self._body, self._clock
        try:
            if not (body.done or body.error is not None):
                clock.waiting(self._loop.time(), self._timeouts.idle, "idle")
                await body.wait_end()
        except asyncio.CancelledError:
            if clock.fired():
                raise self._timed_out(clock.expired) from None
            raise
        finally:
            clock.since = None
            clock.close()
        if body.error is not None:
            raise self._body_error(body.error) from body.error
        return body.take()

    async def iter_chunks(self) -> AsyncGenerator[bytes, None]:
        body, clock = self._body, self._clock
        idle = self._timeouts.idle
        time = self._loop.time
        try:
            while True:
                chunk = body.take()
                if chunk:
                    yield chunk
                    continue
                if body.error is not None:
                    raise self._body_error(body.error) from body.error
                if body.done:
                    return
                clock.waiting(time(), idle, "idle")
                try:
                    await body.wait()
                except asyncio.CancelledError:
                    if clock.fired():
                        raise self._timed_out(clock.expired) from None
                    raise
                clock.since = None
        finally:
            clock.close()

    def release(self) -> None:
        """Done with the reply: a response not read to its end takes its connection with it."""
        self._clock.close()
        body = self._body
        if not body.done:
            body.fail(UpstreamClosed())
            self._conn.abort()

    def _timed_out(self, which: str | None) -> UpstreamTimeout:
        if which == "total":
            limit = self._timeouts.total
            return UpstreamTimeout(
                f"upstream {self._provider!r} did not finish within {limit:g} s", "total"
            )
        return UpstreamTimeout(
            f"upstream {self._provider!r} sent nothing for {self._timeouts.idle:g} s mid-body",
            "idle",
        )

    def _body_error(self, exc: BaseException) -> UpstreamError:
        if isinstance(exc, UpstreamBadResponse):
            return UpstreamUnreachable(
                f"upstream {self._provider!r} sent a body that is not valid HTTP/1.1 framing "
                f"or content encoding mid-body"
            )
        return UpstreamUnreachable(
            f"upstream {self._provider!r} connection closed mid-body ({type(exc).__name__})"
        )


class HttpTransport:
    """POSTs bodies for one provider over its own connection pool.

        transport = HttpTransport("openai", Timeouts(connect=10, first_byte=600))
        reply = await transport.post(url, body, {"content-type": "application/json"})
        ...
        await transport.close()

    The connect timeout bounds the connect (and TLS); the wait for the headers, the body's reads
    and the whole attempt are bounded by an `AttemptClock` the transport's watchdog looks at
    every tick, so no timer is armed per attempt or per chunk.
    """

    def __init__(
        self, provider: str, timeouts: Timeouts = DEFAULT_TIMEOUTS, pool: PoolLimits = DEFAULT_POOL
    ) -> None:
        self._provider = provider
        self.timeouts = timeouts
        self.pool = ConnectionPool(provider, pool, timeouts.connect)
        self._targets: dict[tuple[str, bool], _Target] = {}
        self._watchdog: Watchdog | None = None

    @property
    def stats(self) -> PoolStats:
        return self.pool.stats

    def _target(self, url: str, encoded: bool) -> _Target:
        key = (url, encoded)
        target = self._targets.get(key)
        if target is None:
            if len(self._targets) >= _TARGETS_KEPT:
                self._targets.clear()
            target = self._targets[key] = _parse_target(url, encoded)
        return target

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, encoded: bool = False
    ) -> HttpReply:
        """Send and return once the status line and headers arrived; an error status is returned.

        `encoded`: the URL's path is sent exactly as given, percent-escapes and all (a signed
        request's path must be the one that was signed: SigV4 over `/model/a%3A0/converse`)."""
        target = self._target(url, encoded)
        head = _head(target, headers, len(body))
        timeouts = self.timeouts
        loop = asyncio.get_running_loop()
        watchdog = self._watchdog
        if watchdog is None or watchdog.loop is not loop:
            watchdog = self._watchdog = Watchdog(loop)
        now = loop.time()
        total = timeouts.total
        clock = AttemptClock(watchdog, now, now + total if total is not None else None)
        clock.waiting(now, timeouts.first_byte, "first_byte")
        conn: UpstreamConnection | None = None
        try:
            conn, waited = await self.pool.acquire(target.origin)
            status, raw, response = await conn.request(head, body)
        except asyncio.CancelledError:
            clock.close()
            if conn is not None:
                conn.abort()
            if clock.fired():
                raise self._late(url, clock.expired or "first_byte") from None
            raise
        except (OSError, TimeoutError) as exc:
            clock.close()
            if conn is not None:
                conn.abort()
            raise self._send_error(exc, url, sent=conn is not None) from exc
        clock.since = None
        return HttpReply(status, raw, response, conn, self._provider, timeouts, clock, waited)

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
        await self.pool.close()

    def _late(self, url: str, which: str) -> UpstreamTimeout:
        where = f"upstream {self._provider!r} at {host_port(url)}"
        wait = self.timeouts.total if which == "total" else self.timeouts.first_byte
        return UpstreamTimeout(f"{where} did not answer within {wait or 0:g} s", which)

    def _send_error(self, exc: BaseException, url: str, *, sent: bool) -> UpstreamError:
        """The provider, the upstream's host:port and the cause in words: these messages reach
        clients, so never the URL's user info, path or query, a header, or an exception's text.
        `sent`: a connection was there, so the failure came after the connect."""
        where = f"upstream {self._provider!r} at {host_port(url)}"
        if isinstance(exc, UpstreamClosed):
            return UpstreamUnreachable(f"{where} closed the connection before answering")
        if isinstance(exc, UpstreamBadResponse):
            return UpstreamUnreachable(f"{where} answered with bytes that are not HTTP/1.1")
        if isinstance(exc, TimeoutError) and not sent:
            limit = self.timeouts.connect or 0
            return UpstreamTimeout(
                f"cannot connect to {where}: connect timed out after {limit:g} s", "connect"
            )
        if sent:
            return UpstreamUnreachable(f"{where} unreachable ({type(exc).__name__})")
        return UpstreamUnreachable(f"cannot connect to {where}: {_connect_cause(exc)}")


_CONNECT_ERRNOS: Final[Mapping[int, str]] = {
    errno.ECONNREFUSED: "connection refused",
    errno.ETIMEDOUT: "connect timed out",
    errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ECONNRESET: "connection reset",
}
_RESOLVER_ERRNOS: Final[Mapping[int, str]] = {
    socket.EAI_NONAME: "no such host",
    socket.EAI_AGAIN: "temporary failure, the name server did not answer",
    socket.EAI_FAIL: "the name server failed",
}


def _connect_cause(exc: BaseException) -> str:
    """Classified by exception type and errno, never by message text."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        verify = "certificate verify failed"
        if exc.verify_message:
            verify = f"{verify}: {exc.verify_message}"
        return f"TLS handshake failed ({verify})"
    if isinstance(exc, socket.gaierror):
        detail = _RESOLVER_ERRNOS.get(exc.errno) if exc.errno is not None else None
        return f"name resolution failed ({detail})" if detail else "name resolution failed"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason  # OpenSSL's reason code, e.g. WRONG_VERSION_NUMBER
        detail = reason.lower().replace("_", " ") if isinstance(reason, str) else None
        return f"TLS handshake failed ({detail})" if detail else "TLS handshake failed"
    if isinstance(exc, OSError):
        known = _CONNECT_ERRNOS.get(exc.errno) if exc.errno else None
        if known is not None:
            return known
        if exc.errno:
            return f"{type(exc).__name__} ({os.strerror(exc.errno)})"
    return type(exc).__name__
