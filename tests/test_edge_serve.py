"""The HTTP edge in the real `gateway serve` process: a compression bomb costs a bounded amount
of memory, and what aiohttp's parser refuses is answered in the endpoint's error format.

The gateway runs on its built-in default (the mock provider) in a subprocess; the RSS and peak
RSS of each of its processes (one, or the supervisor and its workers, whichever takes the bomb)
come from /proc (VmRSS, VmHWM: the high-water mark of the process since its exec, unlike
`ru_maxrss`, which can start from the forking parent's size).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import orjson
import pytest

from tests.process_tree import tree
from tests.test_http_edge import LIMIT, MIB, SECRET, check_error, exchange, gzip_bomb, post

GATEWAY = str(Path(sys.executable).parent / "gateway")
LISTENING = re.compile(r"^listening on (?P<url>http://\S+)$")

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")


def memory(pid: int, field: str) -> int:
    """VmRSS or VmHWM of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


class Serve:
    def __init__(self, cwd: Path) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if k != "GATEWAY_CONFIG" and not k.startswith(("OPENAI_", "ANTHROPIC_"))
        }
        self.proc = subprocess.Popen(
            [GATEWAY, "serve", "--port", "0"],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.url: str | None = None
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            found = LISTENING.match(line.strip())
            if found and self.url is None:
                self.url = found["url"]
                self.ready.set()
        self.ready.set()

    def wait_ready(self) -> str:
        assert self.ready.wait(20), self.lines
        assert self.url is not None, self.lines
        return self.url

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def serve(tmp_path: Path):
    server = Serve(tmp_path)
    yield server
    server.kill()


def test_a_gzip_bomb_costs_at_most_the_limit_in_memory(serve):
    url = serve.wait_ready()
    bomb = gzip_bomb(1024)  # about 1 MB that inflates to 1 GiB
    assert len(bomb) < 1100 * 1024
    before = {pid: memory(pid, "VmRSS") for pid in tree(serve.proc.pid)}
    reply = post(url, "/v1/messages", bomb, "gzip")
    growth = max(memory(pid, "VmHWM") - rss for pid, rss in before.items())
    # The body is bounded by the limit (64 MiB); aiohttp's own read() took several times it.
    assert growth < 2 * LIMIT, f"peak RSS grew by {growth // MIB} MiB"
    error = check_error(reply, "anthropic", 413)
    assert error["type"] == "request_too_large"


def test_gateway_serve_answers_parser_refusals_in_the_endpoint_format(serve):
    url = serve.wait_ready()
    head = f"POST /v1/messages HTTP/1.1\r\nHost: g\r\nx-api-key: {SECRET}{'k' * 9000}\r\n\r\n"
    check_error(exchange(url, head.encode()), "anthropic", 431)
    check_error(exchange(url, b"NOT HTTP AT ALL\r\n\r\n"), "openai", 400)
    body = orjson.dumps({"model": "mock-text", "messages": [{"role": "user", "content": "hi"}]})
    reply = post(url, "/v1/chat/completions", zlib.compress(body), "deflate")
    assert reply.status == 200, reply.body
    serve.kill()
    serve.reader.join(5)
    assert not any(SECRET in line for line in serve.lines)
