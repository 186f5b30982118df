"""The client side: one request per (client format, case, upstream wire, stream), in raw HTTP.

The body is what a real client of that format sends (the openai and anthropic SDKs' shapes);
the reply is kept as the client received it: status, content type, the body's bytes or its SSE
events in order, and how the body ended (`end`): `eof` (a clean end), `reset` (the connection
broke mid-body), `timeout` (the client gave up). Nothing here decides what the reply means.

    reply = await send(session, target, Exchange("anthropic", case, "openai", stream=True))
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp

from gateway.conformance.cases import STOP_SEQUENCE, TOOL_NAME, Case, model_name
from gateway.conformance.sse import Event, SseReader

MAX_TOKENS: Final = 256
SCHEMA: Final = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    "required": ["path", "text"],
}
DESCRIPTION: Final = "Write text to a file."


@dataclass(frozen=True)
class Target:
    base_url: str  # without a trailing /v1
    key: str
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 20.0  # seconds per exchange, beyond the stall
    stall: float = 2.0
    run: str = "run"  # marks this run's requests in the upstream's log


@dataclass(frozen=True)
class Exchange:
    client: str  # the client format
    case: Case
    wire: str  # the upstream wire
    stream: bool

    @property
    def model(self) -> str:
        return model_name(self.wire, self.case.id)


@dataclass
class Reply:
    status: int | None = None  # None: no HTTP answer at all
    content_type: str = ""
    body: bytes = b""
    events: list[Event] = field(default_factory=list)
    end: str = "eof"  # eof | reset | timeout | refused
    unfinished_event: bool = False  # bytes of an event no blank line ended
    seconds: float = 0.0
    failure: str | None = None  # the transport error, as the client library named it


def prompt(exchange: Exchange, target: Target) -> str:
    mode = "stream" if exchange.stream else "whole"
    mark = f"[conf {exchange.client} {mode} stall={target.stall:g} run={target.run}]"
    return f"Conformance case {exchange.case.id}. {mark}"


def _chat(case: Case, text: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    body["max_completion_tokens"] = MAX_TOKENS
    if stream:
        body["stream_options"] = {"include_usage": True}
    if case.tools:
        function = {"name": TOOL_NAME, "description": DESCRIPTION, "parameters": SCHEMA}
        body["tools"] = [{"type": "function", "function": function}]
    if case.stop_sequences:
        body["stop"] = [STOP_SEQUENCE]
    return body


def _messages(case: Case, text: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"max_tokens": MAX_TOKENS}
    body["messages"] = [{"role": "user", "content": text}]
    if case.tools:
        body["tools"] = [{"name": TOOL_NAME, "description": DESCRIPTION, "input_schema": SCHEMA}]
    if case.stop_sequences:
        body["stop_sequences"] = [STOP_SEQUENCE]
    return body


def _responses(case: Case, text: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"input": text, "max_output_tokens": MAX_TOKENS, "store": False}
    if case.tools:
        tool = {"type": "function", "name": TOOL_NAME, "description": DESCRIPTION}
        body["tools"] = [tool | {"parameters": SCHEMA}]
    return body


@dataclass(frozen=True)
class ClientFormat:
    """How a client of one format asks: its path, its body (the SDK's shape, but for the model
    and the stream flag), the headers it adds to the bearer key."""

    path: str
    request: Callable[[Case, str, bool], dict[str, Any]]
    key_headers: Callable[[str], dict[str, str]] = lambda key: {}


CLIENT_FORMATS: Final[Mapping[str, ClientFormat]] = {
    "openai": ClientFormat("/v1/chat/completions", _chat),
    "anthropic": ClientFormat(
        "/v1/messages",
        _messages,
        lambda key: {"x-api-key": key, "anthropic-version": "2023-06-01"},
    ),
    "responses": ClientFormat("/v1/responses", _responses),
}


def body_for(exchange: Exchange, target: Target) -> dict[str, Any]:
    body: dict[str, Any] = {"model": exchange.model, "stream": exchange.stream}
    fmt = CLIENT_FORMATS[exchange.client]
    return body | fmt.request(exchange.case, prompt(exchange, target), exchange.stream)


def headers_for(client: str, target: Target) -> dict[str, str]:
    headers = {"content-type": "application/json", "authorization": f"Bearer {target.key}"}
    headers |= CLIENT_FORMATS[client].key_headers(target.key)
    headers.update(target.headers)
    return headers


async def send(session: aiohttp.ClientSession, target: Target, exchange: Exchange) -> Reply:
    reply = Reply()
    loop = asyncio.get_running_loop()
    started = loop.time()
    limit = target.timeout + (target.stall if exchange.case.id == "stall" else 0.0)
    try:
        async with asyncio.timeout(limit):
            await _exchange(session, target, exchange, reply)
    except TimeoutError:
        reply.end = "timeout"
    reply.seconds = loop.time() - started
    return reply


async def _exchange(
    session: aiohttp.ClientSession, target: Target, exchange: Exchange, reply: Reply
) -> None:
    url = target.base_url + CLIENT_FORMATS[exchange.client].path
    body = body_for(exchange, target)
    try:
        async with session.post(
            url, json=body, headers=headers_for(exchange.client, target)
        ) as response:
            reply.status = response.status
            reply.content_type = response.headers.get("content-type", "")
            sse = reply.content_type.split(";")[0].strip().lower() == "text/event-stream"
            reader = SseReader()
            try:
                async for data in response.content.iter_any():
                    reply.body += data
                    if sse:
                        reply.events += reader.feed(data)
            except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
                reply.end, reply.failure = "reset", type(exc).__name__
            reply.unfinished_event = sse and reader.pending
    except aiohttp.ClientConnectorError as exc:
        reply.end, reply.failure = "refused", type(exc).__name__
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
        reply.end, reply.failure = "reset", type(exc).__name__
