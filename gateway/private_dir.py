"""The directory a supervisor and its workers share, and that the last of them removes.

It holds the shared Responses store (prompts and answers: the directory is private to the user,
mode 0700, in the temporary directory) and prometheus_client's multiprocess files. The supervisor
removes it once its workers are gone; when the supervisor itself was killed, its workers stop on
their own, and the last one to leave removes it, so no prompt stays behind in /tmp.

"Last" is decided by the kernel: every process holds a shared `flock` on the directory's lock
file while it runs; leaving, it drops its own and asks for an exclusive one without waiting,
which succeeds only when no other process holds the directory any more. When every process of a
gateway was killed at once (a cgroup's kill, the OOM killer), none could: the next supervisor to
start removes such directories of this user (unheld, untouched for STALE_AFTER seconds).

    shared = PrivateDir.create()       # the supervisor: made and held
    shared = PrivateDir(path)          # a worker: held by join()
    shared.join()
    ...
    shared.leave()                     # removes the directory when no one else holds it
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import time
from typing import Final

LOCK: Final = "lock"
PREFIX: Final = "llm-gateway-"
STALE_AFTER: Final = 60.0  # seconds: older than any start, so never a directory being made
log = logging.getLogger("gateway.supervisor")


class PrivateDir:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock: int | None = None

    @classmethod
    def create(cls) -> PrivateDir:
        """A new directory in the temporary directory (mode 0700), held by this process; first,
        the stale ones of gateways that were killed whole are removed."""
        remove_stale(tempfile.gettempdir())
        shared = cls(tempfile.mkdtemp(prefix=PREFIX))
        os.mkdir(os.path.join(shared.path, "metrics"))
        shared.join()
        return shared

    def join(self) -> None:
        """Hold the directory: it stays until this process leaves (or exits)."""
        if self._lock is not None:
            return
        fd = os.open(os.path.join(self.path, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._lock = fd

    def leave(self) -> bool:
        """Stop holding the directory; remove it when no other process holds it. Returns whether
        this process removed it."""
        fd, self._lock = self._lock, None
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another process still holds it: the last one removes it
            shutil.rmtree(self.path, ignore_errors=True)
            return True
        finally:
            os.close(fd)


def remove_stale(parent: str, stale_after: float = STALE_AFTER) -> list[str]:
    """Remove this user's private directories in `parent` that no process holds and that were not
    touched for `stale_after` seconds; returns their paths."""
    removed: list[str] = []
    cutoff = time.time() - stale_after
    with os.scandir(parent) as entries:
        for entry in entries:
            if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != os.getuid() or info.st_mtime > cutoff:
                    continue
                if _unheld(entry.path):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed.append(entry.path)
                    log.info("removed the private directory of a killed gateway: %s", entry.path)
            except OSError:
                continue  # gone meanwhile, or not ours to read
    return removed


def _unheld(path: str) -> bool:
    try:
        fd = os.open(os.path.join(path, LOCK), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return True  # killed before it held it, and long ago
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # also drops the lock, if taken
    return True
