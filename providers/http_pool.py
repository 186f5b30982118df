"""The keep-alive connections of one provider's transport, and the limit on how many it opens.

    pool = ConnectionPool("openai", PoolLimits(max_connections=4096), connect_timeout=10.0)
    conn, waited = await pool.acquire(origin)     # an idle connection, a new one, or a wait
    ...                                           # the connection comes back by itself
    await pool.close()

An agent fleet opens many long streams at once, so the default limit is far above what one
gateway process serves (`DEFAULT_MAX_CONNECTIONS`); a pool at its limit makes the next request
wait for a connection, and that wait is never silent: it is counted (`PoolStats`, exported in
/metrics), logged (a warning when waits begin, then at most every `WAIT_LOG_EVERY` seconds while
they go on), and returned to the caller so the exchange's record carries it.

Idle connections are kept `keepalive` seconds (LIFO: the most recently used one is reused first,
the oldest are closed as they age out), below the idle timeouts of common servers, so a request
is rarely sent on a connection the server is closing. A name is resolved once per `DNS_TTL`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
from collections import deque
from dataclasses import dataclass
from typing import Final

from providers import tls_trust
from providers.http_conn import UpstreamConnection
from providers.pool_limits import DEFAULT_MAX_CONNECTIONS

log = logging.getLogger("gateway.upstream")

DEFAULT_KEEPALIVE: Final = 30.0
DNS_TTL: Final = 300.0
WAIT_LOG_EVERY: Final = 10.0


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """`max_connections`: open connections per provider (None: no limit); `keepalive`: seconds
    an idle connection is kept for the next request."""

    max_connections: int | None = DEFAULT_MAX_CONNECTIONS
    keepalive: float = DEFAULT_KEEPALIVE


DEFAULT_POOL: Final = PoolLimits()


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: scheme, host and port (the pool keeps connections per origin)."""

    host: str
    port: int
    tls: bool


@dataclass(slots=True)
class PoolStats:
    """What /metrics reads of a pool, at scrape time (plain counters: nothing per request)."""

    limit: int | None
    open: int = 0  # connections open or being opened
    idle: int = 0
    waiting: int = 0  # requests waiting for a connection now
    waits: int = 0  # requests that had to wait, since the start
    wait_seconds: float = 0.0  # how long they waited, in all


def _verified_tls_context() -> ssl.SSLContext:
    """The system's trust store, hostname checks on, ALPN http/1.1: aiohttp's own verified
    context when it has one (each copy of the store holds about a MiB; a serving process's
    holds none until its first TLS upstream: providers.tls_trust), else a new one."""
    from aiohttp import connector

    made = getattr(connector, "_SSL_CONTEXT_VERIFIED", None)
    if isinstance(made, ssl.SSLContext) and made.verify_mode == ssl.CERT_REQUIRED:
        return made
    context = ssl.create_default_context()
    context.set_alpn_protocols(("http/1.1",))
    return context


# One context for every provider, made at import, before any loop runs.
DEFAULT_TLS: Final = _verified_tls_context()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class ConnectionPool:
    def __init__(self, provider: str, limits: PoolLimits, connect_timeout: float | None) -> None:
        self.provider = provider
        self.limits = limits
        self.connect_timeout = connect_timeout
        self.stats = PoolStats(limits.max_connections)
        self._idle: dict[Origin, deque[UpstreamConnection]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._addresses: dict[tuple[str, int], tuple[float, list[tuple[int, tuple[str, int]]]]] = {}
        self._logged_at: float | None = None
        self._closed = False

    async def acquire(self, origin: Origin) -> tuple[UpstreamConnection, float]:
        """A connection to `origin` and the seconds spent waiting for one (0.0 without a wait).

        Raises what connecting raised: OSError (socket.gaierror, ssl.SSLError included) or
        TimeoutError when the connect took longer than `connect_timeout`."""
        loop = asyncio.get_running_loop()
        stats = self.stats
        waited_since: float | None = None
        while True:
            conn = self._idle_connection(origin, loop.time())
            if conn is not None:
                break
            limit = stats.limit
            if limit is None or stats.open < limit:
                stats.open += 1
                try:
                    conn = await self._connect(origin, loop)
                except BaseException:
                    stats.open -= 1
                    self._wake()
                    raise
                break
            if waited_since is None:
                waited_since = loop.time()
                self._note_wait(waited_since)
            await self._wait(loop)
        if waited_since is None:
            return conn, 0.0
        waited = loop.time() - waited_since
        stats.waits += 1
        stats.wait_seconds += waited
        return conn, waited

    def _idle_connection(self, origin: Origin, now: float) -> UpstreamConnection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        keepalive = self.limits.keepalive
        stats = self.stats
        while idle:
            conn = idle.pop()
            stats.idle -= 1
            if conn.closed:
                continue
            if now - conn.idle_since >= keepalive:
                conn.close()
                continue
            return conn
        return None

    async def _wait(self, loop: asyncio.AbstractEventLoop) -> None:
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        self.stats.waiting += 1
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake()  # woken, then cancelled: the turn goes to the next waiter
            raise
        finally:
            self.stats.waiting -= 1

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _note_wait(self, now: float) -> None:
        """Waits are logged when they begin, then at most every WAIT_LOG_EVERY seconds."""
        last = self._logged_at
        if last is not None and now - last < WAIT_LOG_EVERY:
            return
        self._logged_at = now
        stats = self.stats
        log.warning(
            "upstream connection limit reached: requests wait for a connection",
            extra={
                "provider": self.provider,
                "max_connections": stats.limit,
                "waiting": stats.waiting + 1,
                "waits_total": stats.waits,
            },
        )

    # --- connections coming back ----------------------------------------------------------------

    def _put_back(self, conn: UpstreamConnection) -> None:
        if self._closed:
            conn.close()
            return
        origin = conn.key
        assert isinstance(origin, Origin)
        idle = self._idle.get(origin)
        if idle is None:
            idle = self._idle[origin] = deque()
        elif idle:
            oldest = idle[0]
            if oldest.closed or conn.idle_since - oldest.idle_since >= self.limits.keepalive:
                idle.popleft()  # aged out (or gone): closed now rather than at the next lookup
                self.stats.idle -= 1
                oldest.close()
        idle.append(conn)
        self.stats.idle += 1
        self._wake()

    def _lost(self, conn: UpstreamConnection) -> None:
        self.stats.open -= 1
        self._wake()

    # --- opening ------------------------------------------------------------------------------

    async def _connect(self, origin: Origin, loop: asyncio.AbstractEventLoop) -> UpstreamConnection:
        tls = await tls_trust.loaded(DEFAULT_TLS) if origin.tls else None
        hostname = origin.host if origin.tls else None

        def protocol() -> UpstreamConnection:
            return UpstreamConnection(loop, origin, self._put_back, self._lost)

        async with asyncio.timeout(self.connect_timeout):
            addresses = await self._resolve(origin, loop)
            error: OSError | None = None
            for family, address in addresses:
                try:
                    _, conn = await loop.create_connection(
                        protocol,
                        host=address[0],
                        port=address[1],
                        family=family,
                        ssl=tls,
                        server_hostname=hostname,
                    )
                except ssl.SSLError:
                    raise  # the address answered: another one would say the same
                except OSError as exc:
                    error = exc
                    continue
                return conn
        assert error is not None  # getaddrinfo returns at least one address or raises
        raise error

    async def _resolve(
        self, origin: Origin, loop: asyncio.AbstractEventLoop
    ) -> list[tuple[int, tuple[str, int]]]:
        host, port = origin.host, origin.port
        if _is_ip(host):
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            return [(int(family), (host, port))]
        now = loop.time()
        cached = self._addresses.get((host, port))
        if cached is not None and cached[0] > now:
            return cached[1]
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [(int(family), (str(addr[0]), int(addr[1]))) for family, _, _, _, addr in infos]
        self._addresses[(host, port)] = (now + DNS_TTL, addresses)
        return addresses

    async def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        self._idle.clear()
        self.stats.idle = 0
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()
        self._waiters.clear()
