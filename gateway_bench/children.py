"""The processes a bench run starts: the fake upstream, the load generator and the gateway.

Each is a child process with its own interpreter, so its CPU is its own in /proc and none of
them shares the bench's event loop or GIL. Readiness is the `listening on http://...` line
each server prints (the upstream on stdout, the gateway on stderr, which goes to a log file
beside its configuration). `stop()` sends SIGTERM, waits, then kills: every child is stopped by
its own process id, whatever happened.

    with Children() as children:
        upstream = children.upstream(port=0)
        gateway = children.gateway(config_path, log_path, env)
        load = children.load_generator()
        result = load.job({"op": "run", ...})
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

import orjson

READY: Final = re.compile(r"listening on (http://\S+)")
START_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 10.0
JOB_SLACK_S: Final = 60.0  # beyond a job's own duration and timeout, before it counts as hung


class ChildFailed(RuntimeError):
    """A child did not start, or stopped answering; the message says which and why."""


@dataclass(slots=True)
class Child:
    name: str
    process: subprocess.Popen[bytes]
    url: str = ""
    log: Path | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        return int(self.url.rpartition(":")[2])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()

    def log_tail(self, lines: int = 12) -> str:
        if self.log is None or not self.log.exists():
            return ""
        with open(self.log, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 8192))
            return b"\n".join(file.read().splitlines()[-lines:]).decode("utf-8", "replace")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready_pipe(child: Child, stream: IO[bytes], timeout: float) -> str:
    """The URL of the ready line read from a pipe (the upstream's stdout)."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if selector.select(deadline - time.monotonic()):
                line = stream.readline().decode("utf-8", "replace")
                if not line:
                    break
                if match := READY.search(line):
                    return match[1]
    finally:
        selector.close()
    raise ChildFailed(f"{child.name} did not start (exit status {child.process.poll()})")


def wait_ready_log(child: Child, timeout: float) -> str:
    """The URL of the ready line written to the child's log file (the gateway's stderr)."""
    assert child.log is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.log.exists():
            with open(child.log, "rb") as file:
                head = file.read(65536).decode("utf-8", "replace")
            if match := READY.search(head):
                return match[1]
        if child.process.poll() is not None:
            break
        time.sleep(0.02)
    status = child.process.poll()
    raise ChildFailed(
        f"{child.name} did not start (exit status {status}); its log ends:\n{child.log_tail()}"
    )


class LoadGenerator:
    """The load generator process: `job(dict)` sends one job and returns its result."""

    def __init__(self, child: Child) -> None:
        self.child = child
        assert child.process.stdin is not None and child.process.stdout is not None
        self._in = child.process.stdin
        self._out = child.process.stdout
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out, selectors.EVENT_READ)

    def job(self, job: Mapping[str, Any]) -> dict[str, Any]:
        self._in.write(orjson.dumps(job) + b"\n")
        self._in.flush()
        budget = float(job.get("duration", 0)) + float(job.get("timeout", 30)) + JOB_SLACK_S
        if not self._selector.select(budget):
            raise ChildFailed(f"the load generator gave no result within {budget:.0f} s")
        line = self._out.readline()
        if not line:
            raise ChildFailed(f"the load generator exited ({self.child.process.poll()})")
        result: dict[str, Any] = orjson.loads(line)
        if "failed" in result:
            raise ChildFailed(f"the load generator failed: {result['failed']}")
        return result

    def close(self) -> None:
        self._selector.close()


class Children:
    """Starts the bench's processes and stops every one of them on exit."""

    def __init__(self) -> None:
        self._started: list[Child] = []

    def __enter__(self) -> Children:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()

    def stop_all(self) -> None:
        while self._started:
            self._started.pop().stop()

    def _spawn(self, name: str, argv: Sequence[str], **kwargs: Any) -> Child:
        process = subprocess.Popen(list(argv), **kwargs)
        child = Child(name, process)
        self._started.append(child)
        return child

    def upstream(self, port: int = 0, host: str = "127.0.0.1") -> Child:
        argv = [sys.executable, "-m", "gateway_bench.upstream", "--host", host]
        child = self._spawn(
            "the fake upstream",
            [*argv, "--port", str(port)],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        assert child.process.stdout is not None
        child.url = wait_ready_pipe(child, child.process.stdout, START_TIMEOUT_S)
        return child

    def load_generator(self) -> LoadGenerator:
        child = self._spawn(
            "the load generator",
            [sys.executable, "-m", "gateway_bench.load"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        return LoadGenerator(child)

    def gateway(
        self,
        config: Path,
        log: Path,
        env: Mapping[str, str],
        port: int,
        workers: int | None = None,
        wrapper: Sequence[str] = (),
        timeout: float = START_TIMEOUT_S,
    ) -> Child:
        """`wrapper`: a command the gateway runs under (valgrind: gateway_bench.instructions),
        which may take `timeout` to start it."""
        argv = [*wrapper, sys.executable, "-m", "gateway", "serve", "--config", str(config)]
        argv += ["--port", str(port)]
        if workers is not None:
            argv += ["--workers", str(workers)]
        with open(log, "ab") as sink:  # O_APPEND: the file may be truncated under it
            child = self._spawn(
                "the gateway",
                argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                env=dict(env),
            )
        child.log = log
        child.url = wait_ready_log(child, timeout)
        return child
