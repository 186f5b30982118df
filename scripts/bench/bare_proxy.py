"""The floor under the gateway's HTTP edge: a bare proxy with nothing of the gateway but its
upstream client (`providers.http`), served by aiohttp's server or by an asyncio protocol over
httptools, the two ways gateway.lean_http chose between. One POST route, the body relayed to the
upstream as is, the answer relayed back; no validation, no record, no log line.

    python ../shared/bench/fake_upstream.py --port 18080 &
    python scripts/bench/bare_proxy.py aiohttp --port 8091 &   # or: httptools
    python ../shared/bench/loadgen.py --url http://127.0.0.1:8091/v1/chat/completions \\
        --model bench-fake-stop -c 32 -d 4 --watch-pid $!

On this project's 2-core machine: 0.128-0.142 ms of CPU per request at concurrency 32 on
aiohttp's server, 0.064-0.081 ms on httptools; 0.263-0.282 and 0.153-0.167 ms at concurrency 1.
"""

import argparse
import asyncio
from typing import cast

import httptools
import uvloop
from aiohttp import web

from providers.http import HttpTransport

HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}


class Relay:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.transport = HttpTransport("bench")

    async def __call__(self, body: bytes) -> bytes:
        reply = await self.transport.post(self.upstream, body, HEADERS)
        return await reply.read()


def serve_aiohttp(relay: Relay, port: int) -> None:
    async def handle(request: web.Request) -> web.Response:
        answer = await relay(await request.read())
        return web.Response(body=answer, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    uvloop.install()
    web.run_app(app, host="127.0.0.1", port=port, print=None, handler_cancellation=True)


class _Connection(asyncio.Protocol):
    """Keep-alive requests, one at a time; enough for the load generator, not for clients."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        body, self.body = b"".join(self.body), []
        asyncio.get_running_loop().create_task(self.answer(body))

    async def answer(self, body: bytes) -> None:
        data = await self.relay(body)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        if self.transport is not None:
            self.transport.write(head % len(data) + data)


def serve_httptools(relay: Relay, port: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        await loop.create_server(lambda: _Connection(relay), "127.0.0.1", port, backlog=4096)
        await asyncio.Event().wait()

    uvloop.run(main())


SERVERS = {"aiohttp": serve_aiohttp, "httptools": serve_httptools}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("server", choices=sorted(SERVERS))
    parser.add_argument("--port", type=int, default=8091)
    parser.add_argument("--upstream", default="http://127.0.0.1:18080/v1/chat/completions")
    args = parser.parse_args()
    relay = Relay(args.upstream)
    SERVERS[args.server](relay, args.port)


if __name__ == "__main__":
    main()
