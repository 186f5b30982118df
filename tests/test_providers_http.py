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
from providers.http import Timeouts
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

    assert "closed the connection before answering" in info.value.message
    assert_no_secret(info.value)


async def test_stall_before_headers_times_out(upstream, providers) -> None:
    up = await upstream(stall_before_headers)
    provider = openai(providers, up.url("/v1"), timeouts=Timeouts(first_byte=0.3, idle=0.3))

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(UpstreamTimeout) as info:
        await provider.send(ProviderRequest(BODY, stream=False, model="m"))

    assert loop.time() - started < 2
    assert info.value.which == "first_byte"
    assert_no_secret(info.value)


async def test_stall_mid_body_times_out_from_iter_chunks(upstream, providers) -> None:
    up = await upstream(stall_mid_body)
    provider = anthropic(providers, up.url(""), timeouts=Timeouts(first_byte=0.3, idle=0.3))

    reply = await provider.send(ProviderRequest(BODY, stream=True, model="m"))
    chunks: list[bytes] = []
    with pytest.raises(UpstreamTimeout) as info:
        async for chunk in reply.iter_chunks():
            chunks.append(chunk)
    reply.release()

    assert chunks == [b"data: first\n\n"]
    assert "mid-body" in info.value.message and info.value.which == "idle"
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


# --- what a failed connection says -----------------------------------------------------------
# The message reaches clients in error bodies: the provider, the upstream host:port and the cause
# in words, never the URL's user info, path or query, nor any header.

URL_SECRET = "url-SECRET-never-shown"


def assert_host_only(exc: BaseException) -> None:
    assert_no_secret(exc)
    for text in (str(exc), repr(exc)):
        assert URL_SECRET not in text
        assert "/v1" not in text


@pytest.mark.parametrize("make", [openai, anthropic])
async def test_refused_port_names_host_and_cause(make, providers) -> None:
    port = free_port()
    # aiohttp refuses credentials in the URL beside an Authorization header (the OpenAI wire).
    userinfo = f"user:{URL_SECRET}@" if make is anthropic else ""
    base_url = f"http://{userinfo}127.0.0.1:{port}/v1/{URL_SECRET}?key={URL_SECRET}"
    provider = make(providers, base_url)

    with pytest.raises(UpstreamUnreachable) as info:
        await provider.send(ProviderRequest(BODY, stream=False, model="m"))

    name = provider.name
    expected = f"cannot connect to upstream {name!r} at 127.0.0.1:{port}: connection refused"
    assert info.value.message == expected
    assert_host_only(info.value)


UNRESOLVABLE = "api.gateway-test.invalid"  # RFC 6761: names under .invalid never resolve


async def test_unresolvable_name_says_name_resolution_failed(providers) -> None:
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.getaddrinfo(UNRESOLVABLE, 443), 5)
    except socket.gaierror:
        pass  # what every resolver should answer, and the one here does, at once
    except TimeoutError:
        pytest.skip("this machine's resolver does not answer for .invalid names within 5 s")
    else:
        pytest.skip("this machine's resolver answers for .invalid names (NXDOMAIN rewriting)")
    provider = anthropic(providers, f"https://{UNRESOLVABLE}/{URL_SECRET}")

    with pytest.raises(UpstreamUnreachable) as info:
        await provider.send(ProviderRequest(BODY, stream=False, model="m"))

    prefix = f"cannot connect to upstream 'an' at {UNRESOLVABLE}:443: name resolution failed"
    assert info.value.message.startswith(prefix), info.value.message
    assert_host_only(info.value)


async def test_tls_to_a_plain_server_says_tls_handshake_failed(providers) -> None:
    async def plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(plain_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        provider = openai(providers, f"https://127.0.0.1:{port}/v1")
        with pytest.raises(UpstreamUnreachable) as info:
            await provider.send(ProviderRequest(BODY, stream=False, model="m"))
    finally:
        server.close()
        await server.wait_closed()

    prefix = f"cannot connect to upstream 'oa' at 127.0.0.1:{port}: TLS handshake failed"
    assert info.value.message.startswith(prefix), info.value.message
    assert_host_only(info.value)


def full_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A listening socket whose accept queue is full: Linux drops further SYNs, so a connect
    neither succeeds nor fails until the client gives up."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    return listener, fillers


async def test_connect_timeout_says_connect_timed_out(providers) -> None:
    listener, fillers = full_listener()
    address = listener.getsockname()
    try:
        try:
            await asyncio.to_thread(socket.create_connection, address, 0.3)
        except TimeoutError:
            pass
        else:
            pytest.skip("this kernel accepts connections past a full backlog")
        provider = openai(
            providers, f"http://127.0.0.1:{address[1]}/v1", timeouts=Timeouts(connect=0.3)
        )
        with pytest.raises(UpstreamTimeout) as info:
            await provider.send(ProviderRequest(BODY, stream=False, model="m"))
    finally:
        for sock in [listener, *fillers]:
            sock.close()

    expected = f"cannot connect to upstream 'oa' at 127.0.0.1:{address[1]}: connect timed out"
    assert info.value.message.startswith(expected), info.value.message
    assert_host_only(info.value)
