"""A loopback upstream that misbehaves at the byte level, on its own thread and event loop.

`tests/upstream.py` answers through aiohttp's server, which always frames what it sends; this
one writes the HTTP/1.1 response by hand on a raw asyncio stream, so it can reset the connection
(SO_LINGER 0, then close: an RST), close right after the headers, end a stream properly but
without its wire's terminator, stall, dribble single bytes, or send bytes that are not the
wire's. Each response says `Connection: close`, so the gateway pools no connection to it and
the test can count file descriptors exactly.

A test scripts plays per model; `script(model, p1, p2, ...)` plays one per request, the last
one repeating. A play gets the request (wire, stream flag, model) and the connection:

    upstream = FaultUpstream()
    upstream.start()
    upstream.script("oa-x", reset_after(2), answer("fine"))  # the first breaks, a retry answers
    ...
    upstream.stop()

It runs on a loop of its own so that `asyncio.all_tasks` of the gateway's loop counts the
gateway's tasks only.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.scenarios import Answer, script_for

WIRES = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
SSE = "text/event-stream"
JSON = "application/json"


@dataclass
class Request:
    path: str
    wire: str
    model: str
    stream: bool
    body: dict[str, Any]


class Conn:
    """One upstream connection, written by hand: a head, then chunks (chunked encoding when no
    length was given), then a clean end, a close (FIN) or a reset (RST)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.chunked = False
        self.peer_closed = False  # the gateway closed its side while this play waited
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def head(
        self,
        status: int = 200,
        content_type: str = SSE,
        length: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        lines = [f"HTTP/1.1 {status} Status", f"content-type: {content_type}", "connection: close"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        if length is None:
            self.chunked = True
            lines.append("transfer-encoding: chunked")
        else:
            lines.append(f"content-length: {length}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()

    async def send(self, data: bytes) -> None:
        if not data:
            return
        if self.chunked:
            data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        self.writer.write(data)
        await self.writer.drain()

    async def end(self) -> None:
        if self.chunked:
            self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    def reset(self) -> None:
        """An RST: linger 0, then close (unless the gateway closed the connection first)."""
        if not self.writer.transport.is_closing():
            sock = self.writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def wait_for_peer(self, seconds: float) -> None:
        """Send nothing for `seconds`, or until the gateway closes its side."""
        try:
            async with asyncio.timeout(seconds):
                while await self.reader.read(65536):
                    pass
            self.peer_closed = True
        except ConnectionError:  # closed with a reset: the gateway left bytes of ours unread
            self.peer_closed = True
        except TimeoutError:
            pass


Play = Callable[[Request, Conn], Awaitable[None]]


# --- what an upstream of each wire sends ---------------------------------------------------------


def pieces(request: Request, text: str) -> list[bytes]:
    """The answer as the wire sends it: SSE frames for a stream, else the body in two halves."""
    script = script_for(request.wire, Answer(text=text), request.model, request.stream)
    if request.stream:
        return list(script.chunks)
    assert script.body is not None
    middle = len(script.body) // 2
    return [script.body[:middle], script.body[middle:]]


async def _answer_head(request: Request, conn: Conn, parts: list[bytes]) -> None:
    if request.stream:
        await conn.head()
    else:
        await conn.head(content_type=JSON, length=sum(map(len, parts)))


# --- plays ---------------------------------------------------------------------------------------


def answer(text: str = "all fine") -> Play:
    """A normal answer."""

    async def play(request: Request, conn: Conn) -> None:
        parts = pieces(request, text)
        await _answer_head(request, conn, parts)
        for part in parts:
            await conn.send(part)
        await conn.end()

    return play


def reset_after(count: int) -> Play:
    """The head and the answer's first `count` pieces, then an RST."""

    async def play(request: Request, conn: Conn) -> None:
        parts = pieces(request, "this answer is cut by a reset")
        await _answer_head(request, conn, parts)
        for part in parts[:count]:
            await conn.send(part)
        await asyncio.sleep(0.05)  # let the pieces reach the gateway before the RST drops them
        conn.reset()

    return play


def mid(request: Request) -> int:
    """How many pieces make "mid-body": three frames of a stream, half of a whole body."""
    return 3 if request.stream else 1


def reset_mid_body() -> Play:
    """The head and the first pieces (`mid`), then an RST."""

    async def play(request: Request, conn: Conn) -> None:
        await reset_after(mid(request))(request, conn)

    return play


def end_mid_stream() -> Play:
    """The head and a stream's first pieces (`mid`), then the body's proper end (the chunked
    body's last chunk): a whole HTTP response, without its wire's terminator."""

    async def play(request: Request, conn: Conn) -> None:
        parts = pieces(request, "this answer ends without its terminator")
        await _answer_head(request, conn, parts)
        for part in parts[: mid(request)]:
            await conn.send(part)
        await conn.end()

    return play


def reset_before_head() -> Play:
    """The request is read, then an RST: no status line at all."""

    async def play(request: Request, conn: Conn) -> None:
        conn.reset()

    return play


def close_after_headers() -> Play:
    """The head of a 200 (chunked, or with the whole body's length), then a FIN."""

    async def play(request: Request, conn: Conn) -> None:
        await _answer_head(request, conn, pieces(request, "never sent"))

    return play


def stall_before_head(seconds: float = 30.0) -> Play:
    async def play(request: Request, conn: Conn) -> None:
        await conn.wait_for_peer(seconds)

    return play


def stall_after(count: int, seconds: float = 30.0) -> Play:
    """The head and `count` pieces, then silence."""

    async def play(request: Request, conn: Conn) -> None:
        parts = pieces(request, "words, then a long silence")
        await _answer_head(request, conn, parts)
        for part in parts[:count]:
            await conn.send(part)
        await conn.wait_for_peer(seconds)

    return play


def stall_mid_body(seconds: float = 30.0) -> Play:
    async def play(request: Request, conn: Conn) -> None:
        await stall_after(mid(request), seconds)(request, conn)

    return play


def huge_text(size: int, events: int = 1) -> Play:
    """A normal answer whose text is `size` bytes of "x": in `events` text events of a stream
    (one when 1), or in the one text field of a whole body."""

    async def play(request: Request, conn: Conn) -> None:
        # Markers as long as the pieces the scenarios split text into, so each is one delta.
        text, marker = ("HUGE " * events, b'"HUGE "') if request.stream else ("HUGE", b'"HUGE"')
        big = b'"' + b"x" * (size // events if request.stream else size) + b'"'
        parts = [part.replace(marker, big) for part in pieces(request, text)]
        await _answer_head(request, conn, parts)
        for part in parts:
            await conn.send(part)
        await conn.end()

    return play


def dribble(text: str = "slow", delay: float = 0.001, every: int = 3) -> Play:
    """A normal answer, one byte per write, with a pause of `delay` after every `every` bytes."""

    async def play(request: Request, conn: Conn) -> None:
        parts = pieces(request, text)
        await _answer_head(request, conn, parts)
        data = b"".join(parts)
        for n in range(len(data)):
            await conn.send(data[n : n + 1])
            if n % every == every - 1:
                await asyncio.sleep(delay)
        await conn.end()

    return play


GARBAGE = [
    b"garbage without a colon\n",
    b": a comment\n",
    b"retry: 10\nid: 7\n",
    b"\xff\xfe\x00 not utf-8\n",
    b"\n\n\n",
]


def with_garbage_lines(text: str = "garbled but whole") -> Play:
    """A stream with lines between its events that are no SSE field the client uses: SSE says
    they are ignored, so the answer is whole."""

    async def play(request: Request, conn: Conn) -> None:
        await conn.head()
        for n, frame in enumerate(pieces(request, text)):
            await conn.send(GARBAGE[n % len(GARBAGE)] + frame)
        await conn.end()

    return play


def invalid_json_after(count: int) -> Play:
    """`count` frames, then a `data:` line that is not JSON, then the rest."""

    async def play(request: Request, conn: Conn) -> None:
        parts = pieces(request, "then the upstream sends nonsense")
        await conn.head()
        for part in parts[:count]:
            await conn.send(part)
        await conn.send(b'data: {"choices": [{"delta": {"content": "unterminated\n\n')
        for part in parts[count:]:
            await conn.send(part)
        await conn.end()

    return play


def raw_stream(chunks: list[bytes], ending: str = "end", gap: float = 0.001) -> Play:
    """A 200 event stream of `chunks` as given, `gap` apart, then a clean end ("end"), a close
    without the last chunk ("close": a FIN) or a reset ("reset")."""

    async def play(request: Request, conn: Conn) -> None:
        await conn.head()
        for chunk in chunks:
            await conn.send(chunk)
            await asyncio.sleep(gap)
        if ending == "end":
            await conn.end()
        elif ending == "reset":
            conn.reset()

    return play


def raw_body(
    status: int, data: bytes, content_type: str = JSON, headers: dict[str, str] | None = None
) -> Play:
    """A whole body as given: an error status, an HTML page, a 200 that is not JSON."""

    async def play(request: Request, conn: Conn) -> None:
        await conn.head(status, content_type, len(data), headers)
        await conn.send(data)
        await conn.end()

    return play


def error_body(wire: str, status: int) -> bytes:
    """The wire's own error JSON for `status`."""
    if wire == "anthropic":
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        error = {"type": kind, "message": f"upstream said {status}"}
        return orjson.dumps({"type": "error", "error": error})
    error = {"message": f"upstream said {status}", "type": "server_error", "param": None}
    return orjson.dumps({"error": {**error, "code": f"upstream_{status}"}})


def error_status(status: int, retry_after: str | None = None) -> Play:
    """`status` with the wire's error JSON, and `retry-after` when given."""

    async def play(request: Request, conn: Conn) -> None:
        headers = {"retry-after": retry_after} if retry_after is not None else None
        await raw_body(status, error_body(request.wire, status), JSON, headers)(request, conn)

    return play


# --- the server ----------------------------------------------------------------------------------


@dataclass
class Seen:
    """What one model's requests met."""

    requests: list[Request] = field(default_factory=list)
    peer_closed: int = 0  # plays that saw the gateway close the connection while they waited


class FaultUpstream:
    def __init__(self) -> None:
        self.plays: dict[str, list[Play]] = {}
        self.seen: dict[str, Seen] = {}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.url = ""

    def script(self, model: str, *plays: Play) -> None:
        self.plays[model] = list(plays)
        self.seen[model] = Seen()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def start(self) -> None:
        self._thread.start()
        self._server = self.run(asyncio.start_server(self._handle, "127.0.0.1", 0))
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._open):
                writer.transport.abort()
            await self._server.wait_closed()

        self.run(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Conn(reader, writer)
        self._open.add(writer)
        seen: Seen | None = None
        try:
            request = await self._read(reader)
            if request is None:
                return
            seen = self.seen.setdefault(request.model, Seen())
            seen.requests.append(request)
            plays = self.plays.get(request.model) or [raw_body(599, b"unscripted model")]
            play = plays.pop(0) if len(plays) > 1 else plays[0]
            await play(request, conn)
            if conn.peer_closed:
                seen.peer_closed += 1
        except OSError:  # the gateway closed the connection first (a reset, an EBADF)
            if seen is not None:
                seen.peer_closed += 1
        finally:
            self._open.discard(writer)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    @staticmethod
    async def _read(reader: asyncio.StreamReader) -> Request | None:
        read = await read_request(reader)
        if read is None:
            return None
        path, body = read
        wire = WIRES.get(path, "openai")
        model = body.get("model", "")
        return Request(path, wire, model, body.get("stream") is True, body)


async def read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, Any]] | None:
    """One request's path (without its query) and JSON body; None when the peer sent none."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    line, *fields = head.decode("latin-1").split("\r\n")
    path = line.split(" ")[1].split("?")[0]
    headers = {}
    for item in fields:
        name, _, value = item.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = orjson.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
    return path, body
