"""A real loopback upstream speaking the providers' wire formats, scripted per request.

A test registers a `Script` under a model name; the upstream answers any request whose `model`
is that name with it, and records what it received. Routes are one per wire:
`POST /v1/chat/completions` (OpenAI) and `POST /v1/messages` (Anthropic).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web


@dataclass
class Script:
    status: int = 200
    body: bytes | None = None  # a whole body (non-streaming or error replies)
    chunks: list[bytes] = field(default_factory=list)  # streamed pieces, sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # between chunks
    stall: float = 0.0  # before the status line
    drop_after: int | None = None  # cut the connection after this many chunks
    # As OpenAI does: a streamed usage chunk goes out only if the request asked for it
    # (`stream_options.include_usage`).
    usage_if_asked: bool = False


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


class FakeUpstream:
    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.received: dict[str, list[Received]] = {}
        self.closed: dict[str, float] = {}  # model -> when the gateway closed its request early
        self.sequences: dict[str, list[Script]] = {}  # model -> the scripts of later requests

    def script(self, model: str, script: Script, *then: Script) -> None:
        """`script` answers the first request for `model`; with `then`, each later request takes
        the next one, and the last keeps answering."""
        self.scripts[model] = script
        self.received[model] = []
        if then:
            self.sequences[model] = list(then)
        else:
            self.sequences.pop(model, None)

    def last(self, model: str) -> Received:
        return self.received[model][-1]

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/v1/messages", self.handle)
        app.router.add_post("/v1/messages/count_tokens", self.handle)
        app.router.add_post("/v1/embeddings", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        model = orjson.loads(raw).get("model", "")
        script = self.scripts.get(model)
        if script is None:
            return web.json_response({"error": {"message": f"unscripted {model}"}}, status=599)
        self.received[model].append(Received(request.path, dict(request.headers), raw))
        following = self.sequences.get(model)
        if following:
            self.scripts[model] = following.pop(0)
        if script.usage_if_asked and not _asked_usage(orjson.loads(raw)):
            script = replace(script, chunks=[c for c in script.chunks if not _usage_chunk(c)])
        try:
            return await self._play(request, script)
        except asyncio.CancelledError:  # served with handler cancellation: the peer closed
            self.closed[model] = time.monotonic()
            raise

    async def _play(self, request: web.Request, script: Script) -> web.StreamResponse:
        if script.stall:
            await asyncio.sleep(script.stall)
        if script.body is not None:
            return web.Response(
                status=script.status,
                body=script.body,
                headers={"content-type": "application/json", **script.headers},
            )
        response = web.StreamResponse(
            status=script.status, headers={"content-type": "text/event-stream", **script.headers}
        )
        await response.prepare(request)
        for n, chunk in enumerate(script.chunks):
            if script.drop_after is not None and n >= script.drop_after:
                assert request.transport is not None
                request.transport.abort()
                return response
            await response.write(chunk)
            if script.delay:
                await asyncio.sleep(script.delay)
        await response.write_eof()
        return response


def _asked_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _usage_chunk(frame: bytes) -> bool:
    if not frame.startswith(b"data: {"):
        return False
    chunk = orjson.loads(frame[6:])
    return chunk.get("choices") == [] and "usage" in chunk


def openai_sse(chunks: list[dict[str, Any]], done: bool = True) -> list[bytes]:
    frames = [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks]
    return [*frames, b"data: [DONE]\n\n"] if done else frames


def anthropic_sse(events: list[dict[str, Any]]) -> list[bytes]:
    return [
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    ]
