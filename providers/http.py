"""Shared aiohttp transport for the HTTP providers.

Each provider owns one `HttpTransport`, hence one `aiohttp.ClientSession` (a pooled, keep-alive
connector), created lazily on first use so that it binds to the loop that serves requests. Foreign
exceptions are mapped here, once, to `gateway.errors` types; the original stays as `__cause__` for
logs. Messages name the provider, the upstream's host:port and the cause in words, classified by
exception type and errno: never the rest of the URL, a header, a key or an exception's text.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from gateway.errors import UpstreamError, UpstreamTimeout, UpstreamUnreachable

# What the transport maps; anything else (a bug, a cancellation) propagates unchanged.
_FOREIGN = (asyncio.TimeoutError, aiohttp.ClientError)

# Errors meaning "the connection went away" once the response has started.
_DROPPED = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)


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


# How often the watchdog looks at the attempts under way: a timeout fires up to this late. One
# timer per provider ticking while there is traffic (and a second after) costs less than a timer
# armed and cancelled per attempt.
TICK: Final = 0.1
IDLE_TICKS: Final = 10


class _Watchdog:
    """Looks at every attempt clock of one transport each `TICK`, while there are any."""

    __slots__ = ("_clocks", "_handle", "_idle", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._clocks: set[_AttemptClock] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._idle = 0  # ticks in a row without a clock

    def watch(self, clock: _AttemptClock) -> None:
        self._clocks.add(clock)
        if self._handle is None:
            self._handle = self._loop.call_later(TICK, self._tick)

    def unwatch(self, clock: _AttemptClock) -> None:
        self._clocks.discard(clock)

    def _tick(self) -> None:
        self._handle = None
        if self._clocks:
            self._idle = 0
            now = self._loop.time()
            for clock in tuple(self._clocks):
                clock.check(now)
        else:
            self._idle += 1
            if self._idle > IDLE_TICKS:
                return  # no traffic: the next attempt starts the ticks again
        self._handle = self._loop.call_later(TICK, self._tick)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._clocks.clear()


class _AttemptClock:
    """The first-byte, idle and total deadlines of one attempt, looked at by the watchdog.

    A wait on the upstream (`waiting(limit)`) stores when it began; bytes arriving end it
    (`since = None`): no timer per attempt or per chunk. At each tick the watchdog asks how long
    the current wait has lasted (a body read also counts the bytes the response took in since,
    as progress) and the clock cancels the waiting task once a deadline passed; `expired` says
    which. Time spent outside a wait (writing to a slow client) is never counted.
    """

    __slots__ = (
        "_content",
        "_deadline",
        "_limit",
        "_seen",
        "_task",
        "_watchdog",
        "expired",
        "since",
        "waited",
    )

    def __init__(self, watchdog: _Watchdog, now: float, deadline: float | None) -> None:
        self._watchdog = watchdog
        self._deadline = deadline  # loop time
        self._task: asyncio.Task[object] | None = asyncio.current_task()
        self._limit: float | None = None
        self._content: aiohttp.StreamReader | None = None  # the body, once it is read
        self._seen = 0  # its bytes at the last look
        self.since: float | None = None  # when the wait under way began
        self.waited = "first_byte"  # what the wait under way is for
        self.expired: str | None = None  # "first_byte", "idle" or "total" once one fired
        watchdog.watch(self)

    def waiting(self, now: float, limit: float | None, what: str) -> None:
        self.since = now
        self._limit = limit
        self.waited = what

    def reading(self, content: aiohttp.StreamReader) -> None:
        self._content = content
        self._seen = content.total_bytes

    def check(self, now: float) -> None:
        since = self.since
        if since is None:
            return  # not waiting on the upstream
        content = self._content
        if content is not None and content.total_bytes != self._seen:
            self._seen = content.total_bytes  # bytes came in: the wait starts over
            self.since = since = now
        deadline = self._deadline
        if deadline is not None and now >= deadline:
            self.expired = "total"
        elif self._limit is not None and now >= since + self._limit:
            self.expired = self.waited
        else:
            return
        self.close()
        if self._task is not None:
            self._task.cancel()

    def fired(self) -> bool:
        """Whether the cancellation being handled is the clock's own (the task is uncancelled)."""
        if self.expired is None or self._task is None:
            return False
        return self._task.uncancel() == 0

    def close(self) -> None:
        self._watchdog.unwatch(self)


class HttpReply:
    """An `UpstreamReply` over an `aiohttp.ClientResponse` that maps read errors and applies
    the idle and total timeouts to the body."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        provider: str,
        timeouts: Timeouts,
        clock: _AttemptClock,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.status: int = response.status
        # Case-insensitive view of the upstream's headers.
        self.headers: Mapping[str, str] = response.headers
        self._response = response
        self._provider = provider
        self._timeouts = timeouts
        self._clock = clock
        self._loop = loop
        clock.reading(response.content)

    async def read(self) -> bytes:
        clock = self._clock
        clock.waiting(self._loop.time(), self._timeouts.idle, "idle")
        try:
            body = await self._response.read()
        except asyncio.CancelledError:
            if clock.fired():
                raise self._timed_out(clock.expired) from None
            raise
        except _FOREIGN as exc:
            raise self._body_error(exc) from exc
        finally:
            clock.since = None
            clock.close()
        return body

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        clock = self._clock
        idle = self._timeouts.idle
        time = self._loop.time
        chunks = self._response.content.iter_any().__aiter__()
        try:
            while True:
                clock.waiting(time(), idle, "idle")
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if clock.fired():
                        raise self._timed_out(clock.expired) from None
                    raise
                clock.since = None
                yield chunk
        except _FOREIGN as exc:
            raise self._body_error(exc) from exc
        finally:
            clock.close()

    def release(self) -> None:
        self._clock.close()
        self._response.release()

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
        if isinstance(exc, asyncio.TimeoutError):
            return UpstreamTimeout(f"upstream {self._provider!r} stalled mid-body", "idle")
        if isinstance(exc, _DROPPED):
            return UpstreamUnreachable(
                f"upstream {self._provider!r} connection closed mid-body ({type(exc).__name__})"
            )
        return UpstreamUnreachable(
            f"upstream {self._provider!r} failed mid-body ({type(exc).__name__})"
        )


class HttpTransport:
    """POSTs bodies for one provider over its own connection pool.

        transport = HttpTransport("openai", Timeouts(connect=10, first_byte=600))
        reply = await transport.post(url, body, {"content-type": "application/json"})
        ...
        await transport.close()

    The connect timeout is aiohttp's; the wait for the headers, the body's reads and the whole
    attempt are bounded by an `_AttemptClock` the transport's watchdog looks at every `TICK`, so
    neither aiohttp nor the gateway arms a timer per attempt or per chunk.
    """

    def __init__(self, provider: str, timeouts: Timeouts = DEFAULT_TIMEOUTS) -> None:
        self._provider = provider
        self.timeouts = timeouts
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect, sock_read=None
        )
        self._session: aiohttp.ClientSession | None = None
        self._watchdog: _Watchdog | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=256, ttl_dns_cache=300, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, encoded: bool = False
    ) -> HttpReply:
        """Send and return once the status line and headers arrived; an error status is returned.

        `encoded`: the URL's path is sent exactly as given, percent-escapes and all (a signed
        request's path must be the one that was signed: SigV4 over `/model/a%3A0/converse`)."""
        session = self._get_session()
        timeouts = self.timeouts
        loop = asyncio.get_running_loop()
        watchdog = self._watchdog
        if watchdog is None or watchdog._loop is not loop:
            watchdog = self._watchdog = _Watchdog(loop)
        now = loop.time()
        total = timeouts.total
        clock = _AttemptClock(watchdog, now, now + total if total is not None else None)
        clock.waiting(now, timeouts.first_byte, "first_byte")
        try:
            target = URL(url, encoded=True) if encoded else url
            response = await session.post(target, data=body, headers=dict(headers))
        except asyncio.CancelledError:
            clock.close()
            if clock.fired():
                raise self._late(url, clock.expired or "first_byte") from None
            raise
        except _FOREIGN as exc:
            clock.close()
            raise self._send_error(exc, url) from exc
        clock.since = None
        return HttpReply(response, self._provider, timeouts, clock, loop)

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _late(self, url: str, which: str) -> UpstreamTimeout:
        where = f"upstream {self._provider!r} at {host_port(url)}"
        wait = self.timeouts.total if which == "total" else self.timeouts.first_byte
        return UpstreamTimeout(f"{where} did not answer within {wait or 0:g} s", which)

    def _send_error(self, exc: BaseException, url: str) -> UpstreamError:
        """The provider, the upstream's host:port and the cause in words: these messages reach
        clients, so never the URL's user info, path or query, a header, or an exception's text."""
        where = f"upstream {self._provider!r} at {host_port(url)}"
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            limit = self.timeouts.connect or 0
            return UpstreamTimeout(
                f"cannot connect to {where}: connect timed out after {limit:g} s", "connect"
            )
        if isinstance(exc, asyncio.TimeoutError):
            return self._late(url, "first_byte")
        if isinstance(exc, aiohttp.ClientConnectorError):
            return UpstreamUnreachable(f"cannot connect to {where}: {_connect_cause(exc)}")
        return UpstreamUnreachable(f"{where} unreachable ({type(exc).__name__})")


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


def host_port(url: str, *, default_port: bool = True) -> str:
    """The URL's host and port (the scheme's own when `default_port` and none is given), never
    its user info, path or query: what a message may say of an upstream."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return host
    if port is None and default_port:
        port = 443 if parts.scheme == "https" else 80
    return f"{host}:{port}" if port is not None else host


def _connect_cause(exc: aiohttp.ClientConnectorError) -> str:
    """Classified by exception type and errno (a DNS failure carries a `socket.gaierror`, as
    `ClientConnectorDNSError` does), never by message text."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        detail = getattr(exc.certificate_error, "verify_message", None)
        verify = f"certificate verify failed: {detail}" if detail else "certificate verify failed"
        return f"TLS handshake failed ({verify})"
    cause = exc.os_error
    if isinstance(cause, socket.gaierror):
        detail = _RESOLVER_ERRNOS.get(cause.errno) if cause.errno is not None else None
        return f"name resolution failed ({detail})" if detail else "name resolution failed"
    if isinstance(exc, aiohttp.ClientSSLError):
        reason = getattr(cause, "reason", None)  # OpenSSL's reason code, e.g. WRONG_VERSION_NUMBER
        detail = reason.lower().replace("_", " ") if isinstance(reason, str) else None
        return f"TLS handshake failed ({detail})" if detail else "TLS handshake failed"
    known = _CONNECT_ERRNOS.get(cause.errno) if cause.errno else None
    if known is not None:
        return known
    if cause.errno:
        return f"{type(cause).__name__} ({os.strerror(cause.errno)})"
    return type(cause).__name__
