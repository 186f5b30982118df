"""Cold start: from a server's process start to the end of its first answered request.

The clock starts just before the process is spawned and stops when a whole 200 answer to a real
request has arrived (a non-streamed Chat request, routed to the fake upstream for a gateway): an
interpreter's start, its imports, its configuration, its stores, its listening socket and the
first request's own path, everything a user waits for after `gateway serve`. Until the server
listens a connection is refused, and the next try follows 2 ms later; a 503 (workers still
starting) is tried again likewise. The fake upstream's own cold start, measured the same way, is
the ratio's denominator: a minimal server on the same interpreter and machine.

The process starts in a session of its own and is stopped as a group (SIGTERM, then SIGKILL):
a command given as `sh -c '...'` (another gateway, `--compare-start`) leaves nothing behind.

    seconds = cold_start(argv, env, url, request, timeout=30.0)
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway_bench.children import STOP_TIMEOUT_S, ChildFailed

POLL_S: Final = 0.002
ATTEMPT_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class FirstRequest:
    """The request a cold start waits to see answered."""

    host: str
    port: int
    path: str
    body: bytes
    headers: Mapping[str, str]


def answered(request: FirstRequest) -> bool:
    """One try: True when a whole 200 answer came back; False while the server is not there."""
    connection = http.client.HTTPConnection(request.host, request.port, timeout=ATTEMPT_TIMEOUT_S)
    try:
        connection.request("POST", request.path, body=request.body, headers=dict(request.headers))
        response = connection.getresponse()
        response.read()
        return response.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def signal_group(process: subprocess.Popen[bytes], number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, number)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group (it leads a session of its own), SIGKILL after a while."""
    signal_group(process, signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        signal_group(process, signal.SIGKILL)
        process.wait()
    signal_group(process, signal.SIGKILL)  # what is left of the group, its leader gone


def start(argv: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as sink:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            env=dict(env),
            start_new_session=True,
        )


def wait_answered(
    process: subprocess.Popen[bytes],
    request: FirstRequest,
    deadline: float,
    log: Path,
) -> None:
    while not answered(request):
        if process.poll() is not None:
            raise ChildFailed(
                f"the command exited ({process.returncode}) before its first answer; its log: {log}"
            )
        if time.perf_counter() > deadline:
            raise ChildFailed(f"no answer from the command it started; its log: {log}")
        time.sleep(POLL_S)


def cold_start(
    argv: Sequence[str],
    env: Mapping[str, str],
    request: FirstRequest,
    log: Path,
    timeout: float = 60.0,
) -> float:
    """Seconds from spawning `argv` to its first whole 200 answer to `request`; the process is
    stopped (SIGTERM, then SIGKILL) before this returns. ChildFailed when it exits or does not
    answer within `timeout`."""
    started = time.perf_counter()
    process = start(argv, env, log)
    try:
        wait_answered(process, request, started + timeout, log)
        return time.perf_counter() - started
    finally:
        stop(process)
