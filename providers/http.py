"""Shared aiohttp transport for the HTTP providers.

Each provider owns one `HttpTransport`, hence one `aiohttp.ClientSession` (a pooled, keep-alive
connector), created lazily on first use so that it binds to the loop that serves requests. Foreign
exceptions are mapped here, once, to `gateway.errors` types; the original stays as `__cause__` for
logs. Messages name the provider and the exception class only: never a URL, header or key.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping

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
            raise self._send_error(exc) from exc
        return HttpReply(response, self._provider)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _send_error(self, exc: BaseException) -> UpstreamError:
        if isinstance(exc, asyncio.TimeoutError):
            return UpstreamTimeout(f"upstream {self._provider!r} did not answer in time")
        if isinstance(exc, aiohttp.ClientConnectorError):
            # strerror may quote the address; the errno's own text never does
            errno = exc.os_error.errno
            reason = os.strerror(errno) if errno else type(exc.os_error).__name__
            return UpstreamUnreachable(f"cannot connect to upstream {self._provider!r}: {reason}")
        name = type(exc).__name__
        return UpstreamUnreachable(f"upstream {self._provider!r} unreachable ({name})")
