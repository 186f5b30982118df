"""The listening sockets of `gateway serve`, bound before anything else starts.

Binding first means a port in use or an address that is not local is reported before the audit
store is opened, in one line that says which setting to change:

    sockets = open_listeners("127.0.0.1", 8080)          # raises OSError (socket.gaierror too)
    ...
    except OSError as exc:
        print(listen_failure(exc, address))

With workers, the supervisor reserves the address instead (bound, not listening: it accepts
nothing, so the kernel must route nothing to it) and gives each worker sockets of its own on the
same port with SO_REUSEPORT:

    reserved = reserve_address("127.0.0.1", 0)          # the same errors as open_listeners
    sockets = worker_sockets(reserved)                   # bound; the worker's server listens
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

_PORT_ERRNOS = frozenset({errno.EADDRINUSE, errno.EACCES})
_HOST_ERRNOS = frozenset({errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT})


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where to listen, and where each part was set (`--host`, `server.host in FILE`, ...)."""

    host: str
    port: int
    host_origin: str
    port_origin: str

    def shown_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    def shown(self) -> str:
        return f"{self.shown_host()}:{self.port}"


# Connections the kernel holds for accept(): a fleet of agents opening a thousand streams at once
# must not find a full queue (a refused SYN is retried a second later: a hidden queue). The
# kernel caps it at net.core.somaxconn.
BACKLOG: Final = 4096
OPEN_FILES: Final = 65536  # the soft limit of open files asked for, within the hard limit


def raise_open_files_limit() -> None:
    """Open files up to the hard limit (at most OPEN_FILES): each stream holds two sockets (the
    client's and the upstream's), and a soft limit of 1024, common, would refuse connections
    past ~500 streams. The bench's processes (a thousand held streams) ask for it too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def open_listeners(host: str, port: int, backlog: int = BACKLOG) -> list[socket.socket]:
    """Listening sockets on every address `host` resolves to, as asyncio's `create_server` binds
    them (SO_REUSEADDR, IPv6 sockets IPv6-only); on failure none is left open."""
    sockets = reserve_address(host, port)
    try:
        for sock in sockets:
            sock.listen(backlog)
    except OSError:
        _close(sockets)
        raise
    return sockets


def reserve_address(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address `host` resolves to but not listening: the address is
    checked and taken (a port in use fails here, port 0 gets its number), and since nothing
    listens the kernel routes no connection to them. On failure none is left open.

    They do not set SO_REUSEPORT, so a port another gateway's workers share is in use."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sockets.append(_bound(family, kind, proto, address, reuse_port=False))
    except OSError:
        _close(sockets)
        raise
    return sockets


def worker_sockets(reserved: Sequence[socket.socket]) -> list[socket.socket]:
    """One worker's sockets: for each reserved one, a socket bound to the same address and port
    with SO_REUSEPORT, not yet listening. The worker's server listens once it can accept, and the
    kernel then spreads new connections over the workers listening there."""
    sockets: list[socket.socket] = []
    try:
        for held in reserved:
            address = held.getsockname()
            sockets.append(_bound(held.family, held.type, held.proto, address, reuse_port=True))
    except OSError:
        _close(sockets)
        raise
    return sockets


def _bound(family: int, kind: int, proto: int, address: Any, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _close(sockets: Sequence[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def listen_failure(exc: OSError, address: ListenAddress) -> str:
    """`cannot listen on H:P (<the setting to change>): <cause>`."""
    if isinstance(exc, socket.gaierror):
        cause = f"name resolution failed ({exc.strerror})"
        origin = address.host_origin
    else:
        cause = os.strerror(exc.errno) if exc.errno else type(exc).__name__
        if exc.errno in _PORT_ERRNOS:
            origin = address.port_origin
        elif exc.errno in _HOST_ERRNOS:
            origin = address.host_origin
        else:
            origin = f"{address.host_origin}; {address.port_origin}"
    return f"cannot listen on {address.shown()} ({origin}): {cause}"
