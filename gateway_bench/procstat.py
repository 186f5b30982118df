"""CPU time and resident memory of process trees, read from /proc (Linux).

CPU is utime + stime of every process in the tree (`/proc/<pid>/stat`), in clock ticks: what
the kernel charged the processes, whatever else competed for the cores meanwhile; a delta over a
measured window divided by the requests in it is the CPU per request. It is never inferred from
wall time. Its resolution is one tick (10 ms at the usual USER_HZ of 100), which is why windows
last seconds. RSS is the sum of each process's resident set (`/proc/<pid>/statm`): pages shared
between the processes of a tree (forked workers) count once per process, an overestimate;
PSS (`/proc/<pid>/smaps_rollup`) splits them, and is what a tree of workers really holds.

    tree = ProcessTree([pid])
    before = tree.cpu_seconds()
    ...                                   # the measured window
    cpu = tree.cpu_seconds() - before
    tree.rss_bytes()

`listening_pids(port)` finds the processes holding a loopback port's listening socket (through
/proc/net/tcp and /proc/<pid>/fd), for a gateway the bench did not start.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Final

TICKS_PER_SECOND: Final = os.sysconf("SC_CLK_TCK")
PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")
LISTEN: Final = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as file:
                found += [int(child) for child in file.read().split()]
        except OSError:
            continue
    return found


def descendants(roots: Iterable[int]) -> list[int]:
    """The roots and every process under them (each once)."""
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen or not os.path.exists(f"/proc/{pid}"):
            continue
        seen.append(pid)
        todo += children(pid)
    return seen


def cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            # The command name may hold spaces and parentheses: fields start after the last ')'.
            fields = file.read().rpartition(b")")[2].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, IndexError, ValueError):
        return 0


def rss_pages(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as file:
            return int(file.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def pss_kilobytes(pid: int) -> int:
    """The proportional set size: each shared page split among the processes sharing it. The
    kernel walks the page tables to answer (a millisecond for a 100 MB process), so it is read
    once per window, not sampled."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as file:
            for line in file:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return 0


class ProcessTree:
    """The processes under some roots, looked up once (`refresh()` looks again)."""

    def __init__(self, roots: Iterable[int]) -> None:
        self.roots = tuple(roots)
        self.pids = descendants(self.roots)

    def refresh(self) -> None:
        self.pids = descendants(self.roots)

    def cpu_seconds(self) -> float:
        return sum(cpu_ticks(pid) for pid in self.pids) / TICKS_PER_SECOND

    def rss_bytes(self) -> int:
        return sum(rss_pages(pid) for pid in self.pids) * PAGE_SIZE

    def rss_of_largest(self) -> int:
        """The resident set of the tree's largest process: a worker's, under a supervisor."""
        return max((rss_pages(pid) for pid in self.pids), default=0) * PAGE_SIZE

    def pss_bytes(self) -> int:
        return sum(pss_kilobytes(pid) for pid in self.pids) * 1024


def listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as file:
                next(file)
                for line in file:
                    fields = line.split()
                    local, state, inode = fields[1], fields[3], fields[9]
                    if state == LISTEN and int(local.rpartition(":")[2], 16) == port:
                        inodes.add(inode)
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return inodes


def listening_pids(port: int) -> list[int]:
    """The processes with a listening socket on `port` among their file descriptors, those
    whose parent is not among them first (the root of a forked server's tree)."""
    wanted = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    if not wanted:
        return []
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue  # another user's process, or gone
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") in wanted:
                    found.append(int(entry))
                    break
            except OSError:
                continue
    holders = set(found)
    return sorted(found, key=lambda pid: (parent(pid) in holders, pid))


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return int(file.read().rpartition(b")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return 0
