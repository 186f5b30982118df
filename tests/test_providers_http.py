"""The HTTP providers against a real loopback aiohttp server: headers, body, streaming, failures."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.errors import GatewayError, UpstreamTimeout, UpstreamUnreachable
from providers.anthropic import AnthropicProvider
from providers.base import ProviderRequest
from providers.openai import OpenAIProvider

KEY = "sk-test-SECRET-0123456789"
CLIENT_KEY = "sk-client-SECRET-abcdef"
BODY = b'{"model": "m", "messages": [{"role": "user", "content": "h\\u00e9llo"}]}'
STREAM_PIECES = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]


@dataclass
class Seen:
    """What the fake upstream received."""

    path: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class Upstream:
    server: TestServer
    seen: Seen
    release: asyncio.Event

    def url(self, path: str = "") -> str:
        return str(self.server.make_url(path))


SEEN = web.AppKey("seen", Seen)
RELEASE = web.AppKey("release", asyncio.Event)


async def record(request: web.Request) -> Seen:
    seen = request.app[SEEN]
    seen.path = request.path
    seen.headers = {k.lower(): v for k, v in request.headers.items()}
    seen.body = await request.read()
    return seen


async def ok(request: web.Request) -> web.Response:
    await record(request)
    return web.Response(body=b'{"ok":true}', content_type="application/json")


async def stream(request: web.Request) -> web.StreamResponse:
    await record(request)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for piece in STREAM_PIECES:
        await response.write(piece)
        await asyncio.sleep(0.05)
    await response.write_eof()
    return response


async def rate_limited(request: web.Request) -> web.Response:
    await record(request)
    body = b'{"error":{"type":"rate_limit_error"}}'
    return web.Response(body=body, status=429, content_type="application/json")


async def stall_before_headers(request: web.Request) -> web.Response:
    await record(request)
    await asyncio.wait_for(request.app[RELEASE].wait(), 5)
    return web.json_response({"late": True})


async def stall_mid_body(request: web.Request) -> web.StreamResponse:
    await record(request)
    response = web.StreamResponse()
    await response.prepare(request)
    await response.write(b"data: first\n\n")
    await asyncio.wait_for(request.app[RELEASE].wait(), 5)
    return response


async def drop_mid_body(request: web.Request) -> web.StreamResponse:
    await record(request)
    response = web.StreamResponse()
    response.content_length = 1000
    await response.prepare(request)
    await response.write(b"x" * 10)
    assert request.transport is not None
    request.transport.close()
    return response


async def drop_before_headers(request: web.Request) -> web.Response:
    await record(request)
    assert request.transport is not None
    request.transport.close()
    await asyncio.sleep(0.1)
    return web.Response()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MakeUpstream = Callable[[Handler], Awaitable[Upstream]]


@pytest.fixture
async def upstream(aiohttp_server) -> AsyncIterator[MakeUpstream]:
    """Start a loopback upstream answering both provider paths with one handler."""
    releases: list[asyncio.Event] = []

    async def make(handler: Handler) -> Upstream:
        app = web.Application()
        app[SEEN] = Seen()
        app[RELEASE] = asyncio.Event()
        releases.append(app[RELEASE])
        app.router.add_post("/v1/chat/completions", handler)
        app.router.add_post("/v1/messages", handler)
        server = await aiohttp_server(app)
        return Upstream(server, app[SEEN], app[RELEASE])

    yield make
    for release in releases:  # let stalled handlers finish so the server shuts down quickly
        release.set()


@pytest.fixture
async def providers() -> AsyncIterator[list[OpenAIProvider | AnthropicProvider]]:
    """Providers to close after the test (unclosed sessions fail the run)."""
    made: list[OpenAIProvider | AnthropicProvider] = []
    yield made
    for provider in made:
        await provider.close()


def openai(providers: list, base_url: str, api_key: str | None = KEY, **kw) -> OpenAIProvider:
    provider = OpenAIProvider("oa", base_url, api_key, **kw)
    providers.append(provider)
    return provider


def anthropic(providers: list, base_url: str, api_key: str | None = KEY, **kw) -> AnthropicProvider:
    provider = AnthropicProvider("an", base_url, api_key, **kw)
    providers.append(provider)
    return provider


def assert_no_secret(exc: BaseException) -> None:
    for secret in (KEY, CLIENT_KEY):
        assert secret not in str(exc)
        assert secret not in repr(exc)


# --- OpenAI ----------------------------------------------------------------------------------


async def test_openai_posts_body_unchanged_with_bearer_key(upstream, providers) -> None:
    up = await upstream(ok)
    provider = openai(providers, up.url("/v1/"))  # the trailing slash is stripped

    request = ProviderRequest(
        BODY, stream=False, model="m", headers={"authorization": f"Bearer {CLIENT_KEY}"}
    )
    reply = await provider.send(request)

    assert reply.status == 200
    assert await reply.read() == b'{"ok":true}'
    assert reply.headers["content-type"].startswith("application/json")
    assert up.seen.path == "/v1/chat/completions"
    assert up.seen.body == BODY
    assert up.seen.headers["authorization"] == f"Bearer {KEY}"
    assert up.seen.headers["content-type"] == "application/json"
    assert "text/event-stream" not in up.seen.headers.get("accept", "")
    assert provider.wire == "openai"


async def test_openai_forwards_client_credential_without_key(upstream, providers) -> None:
    up = await upstream(ok)
    provider = openai(providers, up.url("/v1"), api_key=None)

    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    reply = await provider.send(ProviderRequest(BODY, stream=False, model="m", headers=headers))
    await reply.read()

    assert up.seen.headers["authorization"] == f"Bearer {CLIENT_KEY}"


async def test_openai_sends_no_credential_when_none_known(upstream, providers) -> None:
    up = await upstream(ok)
    provider = openai(providers, up.url("/v1"), api_key=None)

    reply = await provider.send(ProviderRequest(BODY, stream=False, model="m"))
    await reply.read()

    assert "authorization" not in up.seen.headers


async def test_openai_streams_chunks_as_they_arrive(upstream, providers) -> None:
    up = await upstream(stream)
    provider = openai(providers, up.url("/v1"))

    reply = await provider.send(ProviderRequest(BODY, stream=True, model="m"))
    chunks = [chunk async for chunk in reply.iter_chunks()]
    reply.release()

    assert up.seen.headers["accept"] == "text/event-stream"
    assert b"".join(chunks) == b"".join(STREAM_PIECES)
    assert len(chunks) == len(STREAM_PIECES)  # the writes were 50 ms apart: not one buffered blob


async def test_error_status_is_returned_not_raised(upstream, providers) -> None:
    up = await upstream(rate_limited)
    provider = openai(providers, up.url("/v1"))

    reply = await provider.send(ProviderRequest(BODY, stream=False, model="m"))

    assert reply.status == 429
    assert await reply.read() == b'{"error":{"type":"rate_limit_error"}}'


# --- Anthropic -------------------------------------------------------------------------------


async def test_anthropic_uses_key_default_version_and_forwards_beta(upstream, providers) -> None:
    up = await upstream(ok)
    provider = anthropic(providers, up.url("/"))

    client = {"anthropic-beta": "a-2025-01-01,b-2025-02-02", "x-api-key": CLIENT_KEY}
    reply = await provider.send(ProviderRequest(BODY, stream=False, model="m", headers=client))
    await reply.read()

    assert up.seen.path == "/v1/messages"
    assert up.seen.body == BODY
    assert up.seen.headers["x-api-key"] == KEY
    assert up.seen.headers["anthropic-version"] == "2023-06-01"
    assert up.seen.headers["anthropic-beta"] == "a-2025-01-01,b-2025-02-02"
    assert up.seen.headers["content-type"] == "application/json"
    assert "authorization" not in up.seen.headers
    assert provider.wire == "anthropic"


async def test_anthropic_forwards_client_version_and_api_key(upstream, providers) -> None:
    up = await upstream(ok)
    provider = anthropic(providers, up.url(""), api_key=None)

    client = {"anthropic-version": "2026-10-21", "x-api-key": CLIENT_KEY}
    reply = await provider.send(ProviderRequest(BODY, stream=False, model="m", headers=client))
    await reply.read()

    assert up.seen.headers["x-api-key"] == CLIENT_KEY
    assert up.seen.headers["anthropic-version"] == "2026-10-21"
    assert "anthropic-beta" not in up.seen.headers


async def test_anthropic_forwards_client_bearer_without_key(upstream, providers) -> None:
    up = await upstream(ok)
    provider = anthropic(providers, up.url(""), api_key=None)

    client = {"authorization": f"Bearer {CLIENT_KEY}"}
    reply = await provider.send(ProviderRequest(BODY, stream=False, model="m", headers=client))
    await reply.read()

    assert up.seen.headers["authorization"] == f"Bearer {CLIENT_KEY}"
    assert "x-api-key" not in up.seen.headers


async def test_anthropic_streams_chunks(upstream, providers) -> None:
    up = await upstream(stream)
    provider = anthropic(providers, up.url(""))

    reply = await provider.send(ProviderRequest(BODY, stream=True, model="m"))
    chunks = [chunk async for chunk in reply.iter_chunks()]

    assert b"".join(chunks) == b"".join(STREAM_PIECES)
    assert len(chunks) == len(STREAM_PIECES)


# --- failures --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("make", [openai, anthropic])
async def test_unreachable_port(make, providers) -> None:
    provider = make(providers, f"http://127.0.0.1:{free_port()}/v1")

    with pytest.raises(UpstreamUnreachable) as info:
        await provider.send(ProviderRequest(BODY, stream=False, model="m"))

    assert "cannot connect" in info.value.message
    assert info.value.__cause__ is not None
    assert_no_secret(info.value)


async def test_disconnect_before_headers_is_unreachable(upstream, providers) -> None:
    up = await upstream(drop_before_headers)
    provider = anthropic(providers, up.url(""))

    with pytest.raises(UpstreamUnreachable) as info:
        await provider.send(ProviderRequest(BODY, stream=False, model="m"))

    assert "ServerDisconnectedError" in info.value.message
    assert_no_secret(info.value)


async def test_stall_before_headers_times_out(upstream, providers) -> None:
    up = await upstream(stall_before_headers)
    provider = openai(providers, up.url("/v1"), timeout=0.3)

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(UpstreamTimeout) as info:
        await provider.send(ProviderRequest(BODY, stream=False, model="m"))

    assert loop.time() - started < 2
    assert isinstance(info.value.__cause__, asyncio.TimeoutError)
    assert_no_secret(info.value)


async def test_stall_mid_body_times_out_from_iter_chunks(upstream, providers) -> None:
    up = await upstream(stall_mid_body)
    provider = anthropic(providers, up.url(""), timeout=0.3)

    reply = await provider.send(ProviderRequest(BODY, stream=True, model="m"))
    chunks: list[bytes] = []
    with pytest.raises(UpstreamTimeout) as info:
        async for chunk in reply.iter_chunks():
            chunks.append(chunk)
    reply.release()

    assert chunks == [b"data: first\n\n"]
    assert "mid-body" in info.value.message
    assert_no_secret(info.value)


async def test_drop_mid_body_is_unreachable_from_iter_chunks(upstream, providers) -> None:
    up = await upstream(drop_mid_body)
    provider = openai(providers, up.url("/v1"))

    reply = await provider.send(ProviderRequest(BODY, stream=True, model="m"))
    received = b""
    with pytest.raises(UpstreamUnreachable) as info:
        async for chunk in reply.iter_chunks():
            received += chunk
    reply.release()

    assert received == b"x" * 10
    assert "connection closed mid-body" in info.value.message
    assert_no_secret(info.value)


async def test_drop_mid_body_is_unreachable_from_read(upstream, providers) -> None:
    up = await upstream(drop_mid_body)
    provider = anthropic(providers, up.url(""))

    reply = await provider.send(ProviderRequest(BODY, stream=False, model="m"))
    with pytest.raises(UpstreamUnreachable) as info:
        await reply.read()

    assert isinstance(info.value, GatewayError)
    assert "connection closed mid-body" in info.value.message
    assert_no_secret(info.value)
