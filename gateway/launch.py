"""The first steps of `gateway serve --workers N`, before the settings are read: the supervisor's
private directory and its first worker started, so that it imports the serving stack while the
supervisor imports, validates and prepares (gateway.supervisor, which starts the others once the
first is ready). Light on purpose: the command line calls it before it imports asyncio, its
logging or the settings' models (a worker is a `subprocess.Popen`: gateway.worker_process), and
the first worker's imports, the longest part of the start, begin some 30 ms sooner.

    launch = Launch.begin(count)     # the workers start importing now
    ...                              # the settings, the report, the address
    supervise(..., launch)           # each worker gets its spec; or launch.abandon()
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, NamedTuple

from gateway.private_dir import PrivateDir
from gateway.signals import RELOAD_SIGNAL, STOP_SIGNALS
from gateway.worker_process import WorkerProcess

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"


class Started(NamedTuple):
    """A worker process started before its spec, and the supervisor's end of its channel (a
    tuple, not a dataclass: dataclasses import inspect, some 6 ms before the first worker)."""

    process: WorkerProcess
    channel: socket.socket


class Launch:
    """The supervisor's first steps, before the settings are read: its private directory and
    (`begin`) its workers, importing while it prepares. `abandon` when the gateway does not
    start after all: the waiting workers are killed, the directory removed."""

    def __init__(self, env: Mapping[str, str] = os.environ) -> None:
        self.shared = PrivateDir.create()
        self.metrics_dir = os.path.join(self.shared.path, "metrics")
        self.env = {**without(env, "prometheus_multiproc_dir"), MULTIPROC_ENV: self.metrics_dir}
        self.started: list[Started] = []

    @classmethod
    def begin(cls, count: int, env: Mapping[str, str] = os.environ) -> Launch:
        """The first worker starts now; the supervisor starts the others once it is ready
        (gateway.supervisor's `_staggered`)."""
        launch = cls(env)
        if count > 1:
            try:
                launch.started = [start_worker(launch.env)]
            except OSError:  # the supervisor starts them again, and says why it cannot
                launch.started = []
        return launch

    def abandon(self) -> None:
        try:
            discard(self.started)
        finally:
            self.started = []
            self.shared.leave()


def start_worker(env: Mapping[str, str]) -> Started:
    """A worker process, which imports the serving stack and then waits for its spec."""
    channel, theirs = socket.socketpair()
    try:
        with _blocked((*STOP_SIGNALS, RELOAD_SIGNAL)):  # the mask is inherited through exec
            popen = subprocess.Popen(
                [
                    sys.executable,
                    "-P",  # never a `gateway` directory in the working directory: ours
                    "-m",
                    "gateway.worker",
                    str(theirs.fileno()),
                ],
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env=env,
                process_group=0,
            )
    except BaseException:
        channel.close()
        raise
    finally:
        theirs.close()
    return Started(WorkerProcess(popen), channel)


def discard(started: Sequence[Started]) -> None:
    """Workers that never got a spec (nothing to flush, nothing said yet): killed, and reaped
    at once (a killed process that waits for its spec ends as soon as it is killed)."""
    for worker in started:
        worker.channel.close()
        with contextlib.suppress(ProcessLookupError):
            worker.process.kill()
    for worker in started:
        worker.process.wait_blocking()


@contextlib.contextmanager
def _blocked(signals: Sequence[signal.Signals]) -> Iterator[None]:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def without(env: Mapping[str, str], name: str) -> dict[str, str]:
    return {key: value for key, value in env.items() if key != name}
