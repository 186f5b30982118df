"""The directory a supervisor and its workers share, and that the last of them removes.

It holds the shared Responses store (prompts and answers: the directory is private to the user,
mode 0700, in the temporary directory) and prometheus_client's multiprocess files. The supervisor
removes it once its workers are gone; when the supervisor itself was killed, its workers stop on
their own, and the last one to leave removes it, so no prompt stays behind in /tmp.

"Last" is decided by the kernel: every process holds a shared `flock` on the directory's lock
file while it runs; leaving, it drops its own and asks for an exclusive one without waiting,
which succeeds only when no other process holds the directory any more.

    shared = PrivateDir.create()       # the supervisor: made and held
    shared = PrivateDir(path)          # a worker: held by join()
    shared.join()
    ...
    shared.leave()                     # removes the directory when no one else holds it
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from typing import Final

LOCK: Final = "lock"
PREFIX: Final = "llm-gateway-"


class PrivateDir:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock: int | None = None

    @classmethod
    def create(cls) -> PrivateDir:
        """A new directory in the temporary directory (mode 0700), held by this process."""
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
