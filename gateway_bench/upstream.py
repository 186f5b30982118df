"""The bench's fake upstream: every wire the gateway speaks, with zero added latency.

    python -m gateway_bench.upstream --port 18080     # prints "listening on http://..." when ready

It runs in a process of its own on uvloop, as a raw `asyncio.Protocol` with httptools parsing
HTTP/1.1 (keep-alive, content-length or chunked framing), because on a two-core machine it
competes with the gateway it measures: every microsecond it spends is taken from the gateway.
So it reads only what chooses the answer (the path; `model` and `stream` from the JSON body
where the path does not say them), and answers with bytes rendered once per (wire, model,
stream) and kept: status line, headers and body, chunk-encoded for streams.

The model name picks the scenario (`gateway_bench.scenario`): chunk count, a burst (the whole
stream in one write, so a reader gets many events per read) or paced writes (one event per
write, `-p<ms>` apart, so a reader gets one event per read), or a held stream (its first event,
then nothing until the client leaves). `GET /_bench/stats` answers the requests served per wire.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast

import httptools
import orjson

from gateway import event_loop
from gateway.listen import raise_open_files_limit
from gateway_bench.scenario import Scenario
from gateway_bench.targets import require_loopback_host
from gateway_bench.wires import JSON, Wire, wire_of_path

MAX_ANSWERS: Final = 1024  # distinct (wire, model, stream) kept; more start the cache afresh
STATS_PATH: Final = "/_bench/stats"


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def head(status: int, content_type: str, length: int | None) -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}.get(status, b"Error")
    framing = b"transfer-encoding: chunked" if length is None else b"content-length: %d" % length
    return b"HTTP/1.1 %d %b\r\ncontent-type: %b\r\n%b\r\n\r\n" % (
        status,
        reason,
        content_type.encode(),
        framing,
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """One answer as the bytes to write: `writes[0]` carries the head, the last one the end of
    the body. A burst or whole answer is one write; a paced one is one write per event."""

    writes: tuple[bytes, ...]
    pace_s: float | None = None  # seconds between writes
    hold: bool = False  # write `writes[0]` only, then wait for the client to leave


def prepare(wire: Wire, model: str, stream: bool) -> Prepared:
    scenario = Scenario.parse(model)
    if not stream:
        body = wire.whole(model, scenario)
        return Prepared((head(200, JSON, len(body)) + body,))
    events = [chunked(event) for event in wire.stream(model, scenario)]
    events[-1] += b"0\r\n\r\n"
    events[0] = head(200, wire.stream_type, None) + events[0]
    if scenario.hold:
        return Prepared((events[0],), hold=True)
    if scenario.pace_ms is None:
        return Prepared((b"".join(events),))
    return Prepared(tuple(events), scenario.pace_ms / 1000)


def error(status: int, message: str) -> Prepared:
    body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    return Prepared((head(status, JSON, len(body)) + body,))


class Answers:
    """The prepared answers, rendered on first use; and how many requests each wire served."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, bool], Prepared] = {}
        self.served: collections.Counter[str] = collections.Counter()

    def answer(self, path: str, body: bytes) -> Prepared:
        found = wire_of_path(path)
        if found is None:
            if path == STATS_PATH:
                stats = orjson.dumps(dict(self.served))
                return Prepared((head(200, JSON, len(stats)) + stats,))
            return error(404, f"no such path: {path[:200]}")
        wire, info = found
        model, stream = info.model, info.stream
        if model is None or stream is None:
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError:
                return error(400, "the body is not JSON")
            if not isinstance(parsed, dict) or not isinstance(parsed.get("model"), str):
                return error(400, "the body names no model")
            model, stream = parsed["model"], parsed.get("stream") is True
        self.served[wire.name] += 1
        key = (wire.name, model, stream)
        prepared = self._cache.get(key)
        if prepared is None:
            if len(self._cache) >= MAX_ANSWERS:
                self._cache.clear()
            prepared = self._cache[key] = prepare(wire, model, stream)
        return prepared


class UpstreamConnection(asyncio.Protocol):
    """One client connection: requests parsed by httptools, answered in order."""

    def __init__(self, answers: Answers) -> None:
        self._answers = answers
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._body: list[bytes] = []
        self._waiting: collections.deque[tuple[Prepared, bool]] = collections.deque()
        self._busy = False  # a paced or held answer is being written
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._send(error(400, "malformed HTTP request"), keep_alive=False)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url = b""
        self._body = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        path = httptools.parse_url(self._url).path.decode("latin-1")
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body = []
        prepared = self._answers.answer(path, body)
        keep_alive = self._parser.should_keep_alive()
        if self._busy:  # a pipelined request waits for the answer being written
            self._waiting.append((prepared, keep_alive))
        else:
            self._send(prepared, keep_alive)

    def _send(self, prepared: Prepared, keep_alive: bool) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(prepared.writes[0])
        if prepared.hold:
            self._busy = True  # until the client leaves
        elif len(prepared.writes) == 1:
            self._finished(keep_alive)
        else:
            self._busy = True
            self._schedule(prepared, 1, keep_alive)

    def _schedule(self, prepared: Prepared, index: int, keep_alive: bool) -> None:
        self._timer = asyncio.get_running_loop().call_later(
            prepared.pace_s or 0, self._paced, prepared, index, keep_alive
        )

    def _paced(self, prepared: Prepared, index: int, keep_alive: bool) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(prepared.writes[index])
        if index + 1 < len(prepared.writes):
            self._schedule(prepared, index + 1, keep_alive)
        else:
            self._busy = False
            self._finished(keep_alive)

    def _finished(self, keep_alive: bool) -> None:
        if not keep_alive and self._transport is not None:
            self._transport.close()
            return
        if self._waiting:
            self._send(*self._waiting.popleft())


async def serve(host: str, port: int, announce: bool = True) -> None:
    """Serve until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    answers = Answers()
    server = await loop.create_server(
        lambda: UpstreamConnection(answers), host, port, backlog=4096, reuse_address=True
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = server.sockets[0].getsockname()[1]
    if announce:
        print(f"listening on http://{host}:{bound}", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateway_bench.upstream",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address")
    parser.add_argument("--port", type=int, default=0, help="0 (default): any free port")
    args = parser.parse_args(argv)
    try:
        require_loopback_host(args.host)
    except ValueError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    raise_open_files_limit()
    event_loop.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
