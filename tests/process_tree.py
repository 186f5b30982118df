"""What /proc says about a `gateway serve` and its workers: their pids, whether they still run,
and which of them holds a socket listening on a port (Linux only)."""

from __future__ import annotations

import os
from pathlib import Path

HAS_PROC = Path("/proc/self/task").exists()
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


def children(pid: int) -> list[int]:
    """The direct children of `pid` (every thread's), oldest first."""
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
            found += [int(child) for child in text.split()]
    except OSError:
        return []
    return sorted(found)


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    out = [pid]
    for child in children(pid):
        out += tree(child)
    return out


def running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (exited, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cmdline(pid: int) -> bytes:
    """Its command line (NUL-separated), b"" once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.decode().partition("=") for item in raw.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def listening_inodes(port: int) -> set[int]:
    """Socket inodes listening on `port` (IPv4 and IPv6), whichever process holds them."""
    inodes: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets `pid` has open."""
    inodes: set[int] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes
