"""What the fault tests share: the gateways in front of a FaultUpstream, the clients of the
three endpoints, and the checks every cell makes (the client's view, the record, the leaks).

    fstack = FaultStack(tmp_dir); fstack.start()
    model = scripted(fstack, "anthropic", fault_upstream.reset_mid_body())
    before = usage(fstack)
    reply = send(fstack, CLIENTS["chat"], model, stream=True)
    assert_error_event(CLIENTS["chat"], reply)
    record = the_record(fstack, model)
    assert_ends_clean(fstack, before, caplog, model)
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from gateway.app import build_app
from gateway.settings import parse_settings
from tests import fault_upstream as fu
from tests.conftest import Stack

# --- the gateways -------------------------------------------------------------------------------

# The "quick" providers give up soon, for the cells whose fault is a stall; the others wait
# long enough that a pause of the test process (three threads share one GIL) is never a timeout.
# The quick first-byte wait is still 1 s, not 0.25: it also covers the request's way to the fault
# upstream, and a stall-mid-body cell once timed out before its request was read (a pause of the
# test process under the full suite), so the upstream saw no request and the cell failed.
QUICK = {"connect_timeout": 2, "first_byte_timeout": 1.0, "idle_timeout": 0.25}
CALM = {"connect_timeout": 5, "first_byte_timeout": 10, "idle_timeout": 10}
RETRIES = {
    "single": {"attempts": 1},
    "retry": {"attempts": 3, "backoff": 0.01, "max_backoff": 0.05, "max_retry_after": 1},
}
BODY_LIMIT = 256 * 1024
PREFIX = {"openai": "oa", "anthropic": "an"}


def fault_settings(upstream_url: str, db: Path, retry: dict[str, Any]) -> dict[str, Any]:
    providers, routes = {}, []
    for speed, timeouts in (("quick", QUICK), ("calm", CALM)):
        common = {**timeouts, "api_key": "sk-upstream-fault", "retry": retry}
        providers[f"openai-{speed}"] = {
            "kind": "openai",
            "base_url": f"{upstream_url}/v1",
            **common,
        }
        providers[f"anthropic-{speed}"] = {"kind": "anthropic", "base_url": upstream_url, **common}
        for wire, prefix in PREFIX.items():
            match = f"{speed[0]}{prefix}-*"  # qoa-*, can-*, ...
            routes.append({"match": match, "provider": f"{wire}-{speed}"})
    return {
        "providers": providers,
        "routes": routes,
        "audit": {"store": f"sqlite:///{db}"},
        "circuit": {"failures": 0},  # one cell's faults must not open another's circuit
        "limits": {"max_body_bytes": BODY_LIMIT},
    }


class FaultStack(Stack):
    """The "single" and "retry" gateways on the stack's loop, in front of one FaultUpstream on
    a loop of its own."""

    def __init__(self, audit_dir: Path) -> None:
        super().__init__(audit_dir)
        self.faults = fu.FaultUpstream()

    async def _start(self) -> None:
        for name, retry in RETRIES.items():
            config = parse_settings(fault_settings(self.faults.url, self.audit_db(name), retry))
            self.urls[name] = await self._serve(build_app(config, env={}))

    def start(self) -> None:
        self.faults.start()
        super().start()

    def stop(self) -> None:
        super().stop()
        self.faults.stop()

    def tasks(self) -> int:
        """The gateway loop's tasks (the counting one left out)."""

        async def count() -> int:
            return len(asyncio.all_tasks()) - 1

        return int(self.run(count()))


def scripted(fstack: FaultStack, wire: str, *plays: fu.Play, quick: bool = False) -> str:
    """A fresh model name routed to the `wire` upstream (its quick provider or its calm one),
    whose requests `plays` answer in turn."""
    model = f"{'q' if quick else 'c'}{PREFIX[wire]}-{uuid.uuid4().hex[:12]}"
    fstack.faults.script(model, *plays)
    return model


# --- clients ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    name: str
    path: str
    errors: str  # the shape of its error JSON: "openai" or "anthropic"

    def body(self, model: str, stream: bool) -> dict[str, Any]:
        if self.name == "responses":
            return {"model": model, "input": "hi", "stream": stream}
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
        }
        if self.name == "messages":
            body["max_tokens"] = 64
        return body


CLIENTS = {
    "chat": Client("chat", "/v1/chat/completions", "openai"),
    "messages": Client("messages", "/v1/messages", "anthropic"),
    "responses": Client("responses", "/v1/responses", "openai"),
}
PAIRS = [(client, wire) for client in CLIENTS for wire in PREFIX]
SAME_FORMAT = {("chat", "openai"), ("messages", "anthropic")}


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def send(
    fstack: FaultStack, client: Client, model: str, stream: bool, gateway: str = "single"
) -> Reply:
    url = urlsplit(fstack.urls[gateway])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    try:
        conn.request("POST", client.path, orjson.dumps(client.body(model, stream)), headers)
        reply = conn.getresponse()
        # A body cut short (a socket closed before the last chunk) raises IncompleteRead here.
        body = reply.read()
        return Reply(reply.status, {k.lower(): v for k, v in reply.getheaders()}, body)
    finally:
        conn.close()


def sse_events(body: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) per SSE event; `[DONE]` stays a string."""
    out: list[tuple[str | None, Any]] = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        name, data = None, []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" "))
        if data:
            joined = b"\n".join(data)
            out.append((name, "[DONE]" if joined == b"[DONE]" else orjson.loads(joined)))
    return out


def stream_text(client: Client, events: list[tuple[str | None, Any]]) -> str:
    parts = []
    for name, data in events:
        if client.name == "chat" and isinstance(data, dict) and data.get("choices"):
            parts.append(data["choices"][0]["delta"].get("content") or "")
        elif client.name == "messages" and name == "content_block_delta":
            parts.append(data["delta"].get("text", ""))
        elif client.name == "responses" and name == "response.output_text.delta":
            parts.append(data["delta"])
    return "".join(parts)


def whole_text(client: Client, obj: dict[str, Any]) -> str:
    if client.name == "chat":
        return obj["choices"][0]["message"]["content"]
    if client.name == "messages":
        return "".join(b["text"] for b in obj["content"] if b["type"] == "text")
    return "".join(
        part["text"]
        for item in obj["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


SSE = "text/event-stream"
TERMINATOR = {"chat": "[DONE]", "messages": "message_stop", "responses": "response.completed"}


def assert_answer(client: Client, reply: Reply, stream: bool, text: str) -> None:
    """A 200 with the whole answer: for a stream, ending with the format's terminator."""
    assert reply.status == 200, reply.body[:500]
    if not stream:
        assert whole_text(client, orjson.loads(reply.body)) == text
        return
    assert reply.headers["content-type"].startswith(SSE)
    events = sse_events(reply.body)
    last = events[-1][1] if client.name == "chat" else events[-1][0]
    assert last == TERMINATOR[client.name], events[-3:]
    assert stream_text(client, events) == text


def assert_error_event(client: Client, reply: Reply) -> dict[str, Any]:
    """A 200 stream that began, then ended with the format's own error event (and no
    terminator): its error object."""
    assert reply.status == 200, reply.body[:500]
    events = sse_events(reply.body)
    assert len(events) >= 2, events  # something was relayed before the error
    names = [name for name, _ in events]
    if client.name == "chat":
        assert "[DONE]" not in [data for _, data in events]
        error = events[-1][1]["error"]
        assert {"message", "type", "code"} <= set(error)
    elif client.name == "messages":
        assert names[-1] == "error" and "message_stop" not in names, names
        assert events[-1][1]["type"] == "error"
        error = events[-1][1]["error"]
        assert {"type", "message"} <= set(error)
    else:
        assert names[-2:] == ["error", "response.failed"], names
        assert "response.completed" not in names
        assert events[-1][1]["response"]["status"] == "failed"
        error = events[-2][1]["error"]
    assert gateway_of(client, reply)["truncated"] is True
    return error


def gateway_of(client: Client, reply: Reply) -> dict[str, Any]:
    """The `gateway` object of a stream's last event (Responses: of its response)."""
    last = sse_events(reply.body)[-1][1]
    gateway = last["response"]["gateway"] if client.name == "responses" else last["gateway"]
    assert isinstance(gateway, dict), last
    return gateway


# --- the record and the leaks -------------------------------------------------------------------


def records(fstack: FaultStack, model: str, gateway: str = "single") -> list[dict[str, Any]]:
    """The records of `model`'s exchanges, once the writer has written one."""
    deadline = time.monotonic() + 10
    while not (rows := rows_of(fstack.audit_db(gateway), model)):
        assert time.monotonic() < deadline, f"no audit record for {model}"
        time.sleep(0.01)
    return rows


def rows_of(db: Path, model: str) -> list[dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM audit_records WHERE model = ?", (model,)).fetchall()
        return [{**dict(row), "attempts": json.loads(row["attempts"])} for row in rows]


def the_record(fstack: FaultStack, model: str, gateway: str = "single") -> dict[str, Any]:
    found = records(fstack, model, gateway)
    assert len(found) == 1, found  # one exchange, one record
    return found[0]


def fd_targets(skip: Path) -> list[str]:
    """What the process's open descriptors point at, but the files under `skip`: SQLite keeps
    a closed connection's descriptor open while another connection of the process holds a lock
    on the file, so reading the trail from the test moves that count by one."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not target.startswith(str(skip)):
                out.append(target)
    return sorted(out)


@dataclass(frozen=True)
class Usage:
    fds: int
    tasks: int


def usage(fstack: FaultStack) -> Usage:
    return Usage(len(fd_targets(fstack.audit_dir)), fstack.tasks())


def settled(fstack: FaultStack, before: Usage, slack: int = 0, wait: float = 5.0) -> Usage:
    """What is open once the cell settled: back to `before` (plus `slack`), or after `wait`."""
    deadline = time.monotonic() + wait
    while True:
        now = usage(fstack)
        if now.fds <= before.fds + slack and now.tasks <= before.tasks + slack:
            return now
        if time.monotonic() > deadline:
            return now
        time.sleep(0.02)


ERROR_LOGGERS = ("gateway", "providers", "aiohttp", "asyncio")


def error_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the gateway (or aiohttp, or asyncio under it) logged as an error: an "unhandled"
    traceback line, any ERROR record, any record carrying an exception."""
    return [
        f"{r.name}: {r.getMessage()[:200]}"
        for r in caplog.records
        if r.name.startswith(ERROR_LOGGERS)
        and (r.levelno >= logging.ERROR or r.exc_info or "unhandled" in r.getMessage())
    ]


def assert_ends_clean(
    fstack: FaultStack,
    before: Usage,
    caplog: pytest.LogCaptureFixture,
    *models: str,
    gateway: str = "single",
) -> None:
    """No descriptor and no task more than `before`, no error logged, and, once all settled,
    still exactly one record for each model's exchange."""
    after = settled(fstack, before)
    leaked = fd_targets(fstack.audit_dir)
    assert after.fds <= before.fds, f"descriptors leaked: {before} -> {after}: {leaked}"
    assert after.tasks <= before.tasks, f"asyncio tasks leaked: {before} -> {after}"
    assert error_logs(caplog) == []
    for model in models:  # the writer batches: wait for the record, then count
        assert len(records(fstack, model, gateway)) == 1, model


# --- client faults ------------------------------------------------------------------------------


def raw_request(client: Client, model: str, stream: bool) -> bytes:
    body = orjson.dumps(client.body(model, stream))
    head = (
        f"POST {client.path} HTTP/1.1\r\nHost: gateway\r\ncontent-type: application/json\r\n"
        f"anthropic-version: 2023-06-01\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def connect(fstack: FaultStack, rcvbuf: int | None = None) -> socket.socket:
    url = urlsplit(fstack.urls["single"])
    sock = socket.socket()
    if rcvbuf is not None:  # before connect, so the window the gateway sees is this small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect((url.hostname, url.port))
    return sock


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout} s"
        time.sleep(0.002)


def read_all(sock: socket.socket, size: int = 65536) -> bytes:
    """The rest of a response whose body is chunked: up to its last chunk (or the close)."""
    data = bytearray()
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = sock.recv(size)
        if not chunk:
            break
        data += chunk
    return bytes(data)


def dechunk(raw: bytes) -> tuple[int, bytes]:
    """Status and body of one HTTP/1.1 response with a chunked body, as read from a socket."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    body = bytearray()
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        body += rest[:size]
        rest = rest[size + 2 :]
    return status, bytes(body)


def chunked_body(data: bytes, size: int = 16384) -> bytes:
    """`data` in chunked transfer encoding, `size` bytes a chunk."""
    parts = [data[i : i + size] for i in range(0, len(data), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def read_response(sock: socket.socket) -> Reply:
    """One response with a Content-Length body, read from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        body += chunk
    return Reply(int(lines[0].split(" ")[1]), headers, body)


def rows_with_id(db: Path, request_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while True:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.row_factory = sqlite3.Row
            query = "SELECT * FROM audit_records WHERE id = ?"
            rows = [dict(r) for r in conn.execute(query, (request_id,)).fetchall()]
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.01)
