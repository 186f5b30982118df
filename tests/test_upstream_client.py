"""The upstream client (providers/http_conn.py, http_pool.py, http.py) against real loopback
servers: keep-alive reuse, the connection limit and its measured wait, HTTP/1.1 framings
(chunked, a body ended by the connection's close, 1xx before the answer, gzip and deflate), a
slow reader pausing the socket, bytes that are not HTTP, credentials in the URL, a header that
would split the request.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.app import build_app
from gateway.audit.sqlite_store import SQLiteStore
from gateway.errors import InvalidRequest, UpstreamUnreachable
from gateway.metrics import GatewayMetrics
from gateway.settings import parse_settings
from providers.http import HttpTransport, PoolLimits, Timeouts
from providers.http_conn import HIGH_WATER

JSON = {"content-type": "application/json"}


@pytest.fixture
async def transports() -> AsyncIterator[list[HttpTransport]]:
    made: list[HttpTransport] = []
    yield made
    for transport in made:
        await transport.close()


def transport(made: list[HttpTransport], **pool: int | None) -> HttpTransport:
    t = HttpTransport("up", Timeouts(connect=2, first_byte=5, idle=5, total=10), PoolLimits(**pool))
    made.append(t)
    return t


async def serve(aiohttp_server, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    server: TestServer = await aiohttp_server(app)
    return server


async def raw_server(answer: bytes, *, close: bool) -> tuple[asyncio.Server, str]:
    """A server that reads one request head and answers with `answer`, as given."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        if close:
            writer.close()
        else:
            await reader.read()  # the client's close

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1/x"


async def test_connections_are_reused(aiohttp_server, transports) -> None:
    peers: list[object] = []

    async def ok(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peername"))
        return web.json_response({"ok": len(peers)})

    server = await serve(aiohttp_server, ok)
    t = transport(transports)
    for expected in (b'{"ok": 1}', b'{"ok": 2}', b'{"ok": 3}'):
        reply = await t.post(str(server.make_url("/v1/x")), b"{}", JSON)
        assert await reply.read() == expected
        reply.release()

    assert len(peers) == 3 and len(set(peers)) == 1  # one connection served all three
    assert (t.stats.open, t.stats.idle, t.stats.waits) == (1, 1, 0)


async def test_a_request_past_the_limit_waits_and_the_wait_is_counted_logged_exported(
    aiohttp_server, transports, caplog
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.upstream")
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"ok": True})

    server = await serve(aiohttp_server, slow)
    t = transport(transports, max_connections=1)
    url = str(server.make_url("/v1/x"))
    first = asyncio.create_task(t.post(url, b"{}", JSON))
    second = asyncio.create_task(t.post(url, b"{}", JSON))
    while t.stats.waiting == 0:
        await asyncio.sleep(0.01)
    assert (t.stats.open, t.stats.waiting) == (1, 1)
    await asyncio.sleep(0.1)
    release.set()
    replies = [await first, await second]
    for reply in replies:
        assert await reply.read() == b'{"ok": true}'
        reply.release()

    assert replies[0].pool_wait == 0.0
    assert replies[1].pool_wait >= 0.1  # it waited for the first answer to end
    assert (t.stats.waits, t.stats.waiting, t.stats.open) == (1, 0, 1)
    assert t.stats.wait_seconds == replies[1].pool_wait
    warnings = [r for r in caplog.records if r.name == "gateway.upstream"]
    assert len(warnings) == 1 and "connection limit reached" in warnings[0].getMessage()
    assert (vars(warnings[0])["provider"], vars(warnings[0])["max_connections"]) == ("up", 1)

    metrics = GatewayMetrics()
    metrics.watch_pools(lambda: {"up": t.stats, "offline": None})
    text = metrics.render().decode()
    assert 'gateway_upstream_pool_waits_total{provider="up"} 1.0' in text
    assert 'gateway_upstream_connection_limit{provider="up"} 1.0' in text
    assert 'gateway_upstream_connections{provider="up",state="open"} 1.0' in text
    assert 'gateway_upstream_pool_waiting{provider="up"} 0.0' in text
    assert (
        f'gateway_upstream_pool_wait_seconds_total{{provider="up"}} {t.stats.wait_seconds}' in text
    )
    assert "offline" not in text


async def test_no_limit_opens_a_connection_per_concurrent_request(
    aiohttp_server, transports
) -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    server = await serve(aiohttp_server, slow)
    t = transport(transports, max_connections=None)
    url = str(server.make_url("/v1/x"))
    tasks = [asyncio.create_task(t.post(url, b"{}", JSON)) for _ in range(20)]
    while t.stats.open < 20:
        await asyncio.sleep(0.01)
    release.set()
    for task in tasks:
        (await task).release()
    assert (t.stats.waits, t.stats.limit) == (0, None)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("deflate", zlib.compress)],
)
async def test_compressed_bodies_are_inflated(aiohttp_server, transports, encoding, compress):
    body = b'{"text": "' + b"abc" * 5000 + b'"}'

    async def packed(request: web.Request) -> web.Response:
        assert "gzip" in request.headers["accept-encoding"]
        headers = {**JSON, "content-encoding": encoding}
        return web.Response(body=compress(body), headers=headers)

    server = await serve(aiohttp_server, packed)
    reply = await transport(transports).post(str(server.make_url("/v1/x")), b"{}", JSON)
    assert await reply.read() == body
    reply.release()


async def test_a_body_ended_by_the_connection_close_is_whole(transports) -> None:
    server, url = await raw_server(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhello", close=True)
    async with server:
        t = transport(transports)
        reply = await t.post(url, b"{}", JSON)
        assert (reply.status, await reply.read()) == (200, b"hello")
        reply.release()


async def test_an_informational_response_before_the_answer_is_skipped(transports) -> None:
    answer = (
        b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-real: yes\r\n\r\nok"
    )
    server, url = await raw_server(answer, close=False)
    async with server:
        reply = await transport(transports).post(url, b"{}", JSON)
        assert (reply.status, reply.headers["x-real"], await reply.read()) == (200, "yes", b"ok")
        assert "link" not in reply.headers
        reply.release()


async def test_bytes_that_are_not_http_are_unreachable_naming_no_detail(transports) -> None:
    server, url = await raw_server(b"SSH-2.0-OpenSSH_9.6\r\n\r\n", close=False)
    async with server:
        with pytest.raises(UpstreamUnreachable) as info:
            await transport(transports).post(url, b"{}", JSON)
    assert info.value.message.endswith("answered with bytes that are not HTTP/1.1")


async def test_a_slow_reader_pauses_the_socket(aiohttp_server, transports) -> None:
    piece = b"x" * 65536
    pieces = 64  # 4 MiB, far more than the body buffers

    async def firehose(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(pieces):
            await response.write(piece)
        await response.write_eof()
        return response

    server = await serve(aiohttp_server, firehose)
    reply = await transport(transports).post(str(server.make_url("/v1/x")), b"{}", JSON)
    received = 0
    largest = 0
    async for chunk in reply.iter_chunks():
        received += len(chunk)
        largest = max(largest, len(chunk))
        await asyncio.sleep(0.005)  # a slow client
    reply.release()
    assert received == piece.__len__() * pieces
    # What was buffered between two reads: up to the mark, plus what one socket read brings.
    assert largest <= HIGH_WATER + 2**18


async def test_credentials_in_the_url_go_as_basic_authorization(aiohttp_server, transports):
    seen: dict[str, str] = {}

    async def record(request: web.Request) -> web.Response:
        seen.update(request.headers)
        return web.json_response({})

    server = await serve(aiohttp_server, record)
    url = f"http://us%40er:pa%3Ass@127.0.0.1:{server.port}/v1/x"
    (await transport(transports).post(url, b"{}", JSON)).release()
    assert seen["Authorization"] == "Basic dXNAZXI6cGE6c3M="  # us@er:pa:ss
    assert seen["Host"] == f"127.0.0.1:{server.port}"


async def test_a_header_that_would_split_the_request_is_refused(aiohttp_server, transports):
    calls = 0

    async def count(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response({})

    server = await serve(aiohttp_server, count)
    with pytest.raises(InvalidRequest) as info:
        headers = {**JSON, "x-beta": "a\r\nx-injected: 1"}
        await transport(transports).post(str(server.make_url("/v1/x")), b"{}", headers)
    assert "x-beta" in info.value.message and "injected" not in info.value.message
    assert calls == 0


async def test_the_wait_for_a_connection_is_in_the_record_and_metrics(
    aiohttp_server, aiohttp_client, tmp_path
) -> None:
    """Through the gateway: two exchanges at once on a provider limited to one connection; the
    second one's attempt says how long it waited, and /metrics counts the wait."""
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        body = {
            "id": "c1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
        }
        return web.json_response(body)

    upstream = await serve(aiohttp_server, slow)
    store = tmp_path / "audit.db"
    settings = parse_settings(
        {
            "providers": {
                "up": {
                    "kind": "openai",
                    "base_url": str(upstream.make_url("/v1")),
                    "api_key": "sk-test",
                    "max_connections": 1,
                }
            },
            "routes": [{"match": "*", "provider": "up"}],
            "audit": {"store": f"sqlite:///{store}"},
        }
    )
    client = await aiohttp_client(build_app(settings))
    ask = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    calls = [asyncio.create_task(client.post("/v1/chat/completions", json=ask)) for _ in range(2)]
    await asyncio.sleep(0.3)
    waiting = await (await client.get("/metrics")).text()
    release.set()
    for call in calls:
        assert (await call).status == 200
    metrics = await (await client.get("/metrics")).text()
    await client.close()

    assert 'gateway_upstream_pool_waiting{provider="up"} 1.0' in waiting
    assert 'gateway_upstream_pool_waits_total{provider="up"} 1.0' in metrics
    trail = SQLiteStore(store)
    records = await trail.fetch()
    await trail.close()
    waits = sorted(r.attempts[0].get("pool_wait_ms", 0.0) for r in records)
    assert len(records) == 2 and waits[0] == 0.0 and waits[1] >= 200


async def test_tls_upstream_is_verified_against_the_trust_store(tmp_path, transports) -> None:
    """A real TLS handshake through the pool: a self-signed certificate is refused, by name."""
    import ssl
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(UpstreamUnreachable) as info:
            await transport(transports).post(f"https://127.0.0.1:{port}/v1/x", b"{}", JSON)
    assert info.value.message == (
        f"cannot connect to upstream 'up' at 127.0.0.1:{port}: TLS handshake failed "
        "(certificate verify failed: self-signed certificate)"
    )


def test_several_workers_publish_their_pools_into_the_shared_metrics(tmp_path) -> None:
    """Two worker processes copy their pools into prometheus_client's multiprocess files; a
    scrape (any worker's) sums them: gauges over live workers, totals by what changed."""
    import os
    import subprocess
    import sys

    worker = """
import sys
from prometheus_client import CollectorRegistry
from gateway.pool_metrics import PoolPublisher
from providers.http_pool import PoolStats
stats = PoolStats(limit=8, open=int(sys.argv[1]), idle=1, waits=2, wait_seconds=0.5)
publisher = PoolPublisher(lambda: {"up": stats, "mock": None}, CollectorRegistry())
publisher.publish()
stats.waits, stats.wait_seconds = 5, 2.0
publisher.publish()
"""
    scrape = """
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
import os
registry = CollectorRegistry()
MultiProcessCollector(registry, path=os.environ["PROMETHEUS_MULTIPROC_DIR"])
print(generate_latest(registry).decode())
"""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for open_connections in ("3", "4"):
        subprocess.run([sys.executable, "-c", worker, open_connections], env=env, check=True)
    text = subprocess.run(
        [sys.executable, "-c", scrape], env=env, check=True, capture_output=True, text=True
    ).stdout
    assert 'gateway_upstream_pool_waits_total{provider="up"} 10.0' in text
    assert 'gateway_upstream_pool_wait_seconds_total{provider="up"} 4.0' in text
    assert 'gateway_upstream_connections{provider="up",state="open"} 7.0' in text
    assert 'gateway_upstream_connection_limit{provider="up"} 8.0' in text
    assert "mock" not in text
