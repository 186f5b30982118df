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
from typing import Final
from urllib.parse import urlsplit

import aiohttp

from gateway.errors import UpstreamError, UpstreamTimeout, UpstreamUnreachable

# What the transport maps; anything else (a bug, a cancellation) propagates unchanged.
_FOREIGN = (asyncio.TimeoutError, aiohttp.ClientError)

# Errors meaning "the connection went away" once the response has started.
_DROPPED = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)


class HttpReply:
    """An `UpstreamReply` over an `aiohttp.ClientResponse` that maps read errors."""

    def __init__(self, response: aiohttp.ClientResponse, provider: str) -> None:
        self.status: int = response.status
        # Case-insensitive view of the upstream's headers.
        self.headers: Mapping[str, str] = response.headers
        self._response = response
        self._provider = provider

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except _FOREIGN as exc:
            raise self._body_error(exc) from exc

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except _FOREIGN as exc:
            raise self._body_error(exc) from exc

    def release(self) -> None:
        self._response.release()

    def _body_error(self, exc: BaseException) -> UpstreamError:
        # Timeout first: aiohttp's read timeout is both a TimeoutError and a ClientConnectionError.
        if isinstance(exc, asyncio.TimeoutError):
            return UpstreamTimeout(f"upstream {self._provider!r} stalled mid-body")
        if isinstance(exc, _DROPPED):
            return UpstreamUnreachable(
                f"upstream {self._provider!r} connection closed mid-body ({type(exc).__name__})"
            )
        return UpstreamUnreachable(
            f"upstream {self._provider!r} failed mid-body ({type(exc).__name__})"
        )


class HttpTransport:
    """POSTs bodies for one provider over its own connection pool.

        transport = HttpTransport("openai", timeout=600, connect_timeout=10)
        reply = await transport.post(url, body, {"content-type": "application/json"})
        ...
        await transport.close()

    `timeout` bounds each wait for bytes (the status line, then every read of the body), not the
    whole exchange: a long stream that keeps producing never times out.
    """

    def __init__(self, provider: str, *, timeout: float, connect_timeout: float) -> None:
        self._provider = provider
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=timeout
        )
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=256, ttl_dns_cache=300, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> HttpReply:
        """Send and return once the status line and headers arrived; an error status is returned."""
        session = self._get_session()
        try:
            response = await session.post(url, data=body, headers=dict(headers))
        except _FOREIGN as exc:
            raise self._send_error(exc, url) from exc
        return HttpReply(response, self._provider)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _send_error(self, exc: BaseException, url: str) -> UpstreamError:
        """The provider, the upstream's host:port and the cause in words: these messages reach
        clients, so never the URL's user info, path or query, a header, or an exception's text."""
        where = f"upstream {self._provider!r} at {host_port(url)}"
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            limit = self._timeout.sock_connect
            return UpstreamTimeout(
                f"cannot connect to {where}: connect timed out after {limit:g} s"
            )
        if isinstance(exc, asyncio.TimeoutError):
            return UpstreamTimeout(f"{where} did not answer within {self._timeout.sock_read:g} s")
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
