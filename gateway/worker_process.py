"""A worker's process as its supervisor sees it: a `subprocess.Popen`, started without asyncio
(so that `gateway serve` starts its first worker before it has even imported asyncio:
gateway.launch), and awaited on the supervisor's event loop: by a pidfd, readable once the
process has exited, where the kernel has them (Linux 5.3), else by a thread that waits for it.

Not asyncio's own subprocess: that one can only be started on a running loop, and its
`returncode` is known only once its child watcher has reaped the process. Here `returncode` is
Popen's (None while it runs), and signals to a process that has exited are dropped, as
Popen's `send_signal` drops them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by its methods: `gateway serve` starts a worker before asyncio
    import asyncio


class WorkerProcess:
    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._exit: asyncio.Future[int] | None = None

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def send_signal(self, sig: int) -> None:
        self._popen.send_signal(sig)

    def kill(self) -> None:
        self._popen.kill()

    async def wait(self) -> int:
        """The exit status (negative: the signal that ended it), once it has exited; every
        caller shares one wait."""
        import asyncio

        if self._popen.returncode is not None:
            return self._popen.returncode
        if self._exit is None:
            self._exit = asyncio.ensure_future(self._exited())
        return await asyncio.shield(self._exit)

    def wait_blocking(self) -> int:
        """For a process just killed, outside the event loop (gateway.launch's `discard`)."""
        return self._popen.wait()

    async def _exited(self) -> int:
        import asyncio

        try:
            pidfd = os.pidfd_open(self._popen.pid)
        except (AttributeError, OSError):  # no pidfd here (not Linux, or an old kernel)
            return await asyncio.to_thread(self._popen.wait)
        loop = asyncio.get_running_loop()
        gone = loop.create_future()

        def readable() -> None:
            if not gone.done():
                gone.set_result(None)

        try:
            loop.add_reader(pidfd, readable)
            try:
                await gone
            finally:
                loop.remove_reader(pidfd)
        finally:
            with contextlib.suppress(OSError):
                os.close(pidfd)
        return self._popen.wait()  # it has exited: this only reaps it
