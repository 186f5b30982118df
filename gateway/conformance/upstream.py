"""The scripted upstream: OpenAI Chat at /v1/chat/completions, Anthropic Messages at
/v1/messages, OpenAI Responses at /v1/responses, streamed (SSE, chunked) and not.

    python -m gateway.conformance.upstream --port 18091   # "listening on http://..." when ready

The path picks the wire, the model name the case (`gateway.conformance.cases.parse_model`).
Each answer is written by hand on aiohttp's transport with `Connection: close`, so a case can
reset the connection (SO_LINGER 0, then close: an RST), stall, or close cleanly without the
wire's terminator. The request's `[conf ...]` marker (in the prompt) says which client format
sent it and how long a stall lasts; `GET /_conformance/requests` lists what reached each wire.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import struct
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
from aiohttp import web

from gateway.conformance import wire_anthropic, wire_openai, wire_responses
from gateway.conformance.cases import BY_ID, Fault, Script, parse_model
from gateway.conformance.frames import GARBAGE, JSON_TYPE, SSE_TYPE, Frames

WIRE_OF_PATH: Final = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
    "/v1/responses": "responses",
    "/responses": "responses",
}
MODULES: Final = {"openai": wire_openai, "anthropic": wire_anthropic, "responses": wire_responses}
MARKER: Final = re.compile(rb"\[conf (\w+) (stream|whole) stall=([0-9.]+) run=(\w+)\]")
REQUESTS_PATH: Final = "/_conformance/requests"
DEFAULT_STALL: Final = 2.0
REQUESTS: Final = web.AppKey("requests", list)


@dataclass(frozen=True)
class Reset:
    """An RST: SO_LINGER 0, then close."""


@dataclass(frozen=True)
class Stall:
    seconds: float


Step = bytes | Reset | Stall


def head(status: int, content_type: str, length: int | None) -> bytes:
    framing = "transfer-encoding: chunked" if length is None else f"content-length: {length}"
    lines = [f"HTTP/1.1 {status} Scripted", f"content-type: {content_type}", framing]
    return ("\r\n".join([*lines, "connection: close"]) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def stream_steps(frames: Frames, fault: Fault, stall: float) -> list[Step]:
    """The stream's SSE bytes, chunk-encoded, with `fault` played into them."""
    before, content, after = frames.head, frames.content, frames.stop
    tail: list[Step] = [b"0\r\n\r\n"]
    if fault is Fault.RESET_MID:
        content, after, tail = content[: frames.mid], [], [Reset()]
    elif fault is Fault.RESET_END:
        after, tail = [], [Reset()]
    elif fault is Fault.NO_TERMINATOR:
        after = []
    elif fault is Fault.STALL:
        content, after, tail = content[: frames.mid], [], [Stall(stall), b"0\r\n\r\n"]
    elif fault is Fault.ERROR_EVENT:
        after = frames.error
    elif fault is Fault.GARBAGE:
        content = [*content[: frames.mid], GARBAGE, *content[frames.mid :]]
    elif fault is Fault.MULTILINE:
        content = [*content[: frames.mid - 1], frames.multiline, *content[frames.mid :]]
    body: list[Step] = [chunk(data) for data in [*before, *content, *after]]
    return [head(200, SSE_TYPE, None), *body, *tail]


def whole_steps(body: bytes, fault: Fault, stall: float) -> list[Step]:
    half = len(body) // 2
    if fault is Fault.RESET_MID:
        return [head(200, JSON_TYPE, len(body)), body[:half], Reset()]
    if fault is Fault.STALL:
        return [head(200, JSON_TYPE, len(body)), body[:half], Stall(stall)]
    if fault is Fault.GARBAGE:
        junk = body[:half] + b" oops, this is not JSON"
        return [head(200, JSON_TYPE, len(junk)), junk]
    return [head(200, JSON_TYPE, len(body)), body]


def steps_for(
    wire: str, script: Script, model: str, request: dict[str, Any], stall: float
) -> list[Step]:
    module = MODULES[wire]
    if script.fault is Fault.ERROR_BODY:
        status, error = module.error_body()
        body = orjson.dumps(error)
        return [head(status, JSON_TYPE, len(body)), body]
    if request.get("stream") is True:
        return stream_steps(module.stream(script, model, request), script.fault, stall)
    return whole_steps(orjson.dumps(module.whole(script, model)), script.fault, stall)


async def play(transport: asyncio.BaseTransport, steps: Sequence[Step]) -> None:
    assert isinstance(transport, asyncio.WriteTransport)
    for step in steps:
        if transport.is_closing():
            return
        if isinstance(step, Reset):
            await asyncio.sleep(0.05)  # let the bytes before it reach the peer first
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            return
        if isinstance(step, Stall):
            await asyncio.sleep(step.seconds)
            continue
        transport.write(step)
        await asyncio.sleep(0)  # one write per event: readers see the frames arrive apart
    transport.close()


def marker(raw: bytes) -> tuple[str, str, float, str]:
    """(client format, "stream" or "whole", stall seconds, run id) of the request's marker."""
    found = MARKER.search(raw)
    if found is None:
        return "?", "?", DEFAULT_STALL, "?"
    return found[1].decode(), found[2].decode(), float(found[3]), found[4].decode()


async def answer(request: web.Request) -> web.StreamResponse:
    wire = WIRE_OF_PATH[request.path]
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = {}
    model = body.get("model") if isinstance(body, dict) else None
    found = parse_model(model) if isinstance(model, str) else None
    client, mode, stall, run = marker(raw)
    script = BY_ID[found[1]].script(wire) if found else None
    entry = {"wire": wire, "model": model, "client": client, "mode": mode, "run": run}
    request.app[REQUESTS].append(entry | {"played": script is not None})
    if script is None:
        return web.json_response(MODULES[wire].not_found(str(model)), status=404)
    assert isinstance(body, dict) and isinstance(model, str)
    steps = steps_for(wire, script, model, body, stall)
    transport = request.transport
    if transport is not None:
        await play(transport, steps)
    raise asyncio.CancelledError  # answered by hand: aiohttp writes nothing more


async def requests(request: web.Request) -> web.Response:
    return web.Response(body=orjson.dumps(request.app[REQUESTS]), content_type=JSON_TYPE)


def build_app() -> web.Application:
    app = web.Application(client_max_size=16 * 1024 * 1024)
    app[REQUESTS] = []
    for path in WIRE_OF_PATH:
        app.router.add_post(path, answer)
    app.router.add_get(REQUESTS_PATH, requests)
    return app


async def start(host: str, port: int) -> tuple[web.AppRunner, int]:
    """The upstream on (host, port); its runner and the port it listens on."""
    runner = web.AppRunner(build_app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    address = runner.addresses[0]
    return runner, int(address[1])


async def serve_forever(host: str, port: int) -> None:
    runner, bound = await start(host, port)
    print(f"listening on http://{host}:{bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


class Background:
    """The upstream on a thread and event loop of its own, beside a client on another loop.

    upstream = Background("127.0.0.1", 0); port = upstream.start(); ...; upstream.stop()
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self) -> int:
        """The port it listens on; OSError when it cannot listen."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(start(self.host, self.port), self._loop)
        try:
            self._runner, self.port = future.result(timeout=30)
        except BaseException:
            self.stop()
            raise
        return self.port

    def stop(self) -> None:
        if self._runner is not None:
            cleanup = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            cleanup.result(timeout=30)
            self._runner = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateway.conformance.upstream", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=18091, help="port, 0 for any (18091)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve_forever(args.host, args.port))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(
            f"conformance upstream: cannot listen on {args.host}:{args.port}: {exc}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
