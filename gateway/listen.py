"""The listening sockets of `gateway serve`, bound before anything else starts.

Binding first means a port in use or an address that is not local is reported before the audit
store is opened, in one line that says which setting to change:

    sockets = open_listeners("127.0.0.1", 8080)          # raises OSError (socket.gaierror too)
    ...
    except OSError as exc:
        print(listen_failure(exc, address))
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass

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


def open_listeners(host: str, port: int, backlog: int = 128) -> list[socket.socket]:
    """Listening sockets on every address `host` resolves to, as asyncio's `create_server` binds
    them (SO_REUSEADDR, IPv6 sockets IPv6-only); on failure none is left open."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


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
