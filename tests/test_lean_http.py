"""The lean HTTP/1.1 path (gateway.lean_http) against the real test stack, over raw sockets.

Plain POSTs to the endpoints are served on it; the first request that is anything else hands the
connection to aiohttp from that request's first byte. Keep-alive, pipelining, bytes split
anywhere, `Connection: close`, the hand-over mid-connection and the idle timeout are checked
here; the rest of the suite (SDKs, CLIs, fault matrix, shutdown) runs through it too.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import orjson
import pytest
from aiohttp import web

from gateway.app import build_app
from gateway.edge import EdgeRequestHandler, EdgeServer, make_runner
from gateway.lean_http import AHEAD_LIMIT, LeanConnection
from gateway.settings import default_settings
from tests.served import LoopServers
from tests.test_http_edge import AN, OA, Replies, Reply, connect, post_head, read_reply, valid_body


def runner_for(stack: Any, base: str) -> web.AppRunner:
    port = int(base.rsplit(":", 1)[1].split("/")[0])
    return next(r for r in stack._runners if r.addresses[0][1] == port)


def protocol_of(stack: Any, base: str, sock: socket.socket) -> object:
    """The server-side protocol of the connection `sock` is the client end of."""
    runner = runner_for(stack, base)
    here = sock.getsockname()

    async def find() -> object:
        assert runner.server is not None
        for conn in runner.server.connections:
            transport = conn.transport
            if transport is not None and transport.get_extra_info("peername") == here:
                return conn
        raise AssertionError("no server connection for this socket")

    return stack.run(find())


def lean_post(path: str = OA, extra: str = "") -> bytes:
    body = valid_body(path)
    return post_head(path, len(body), extra) + body


def assert_answered(reply: Reply) -> str:
    assert reply.status == 200, reply.body
    assert reply.json()["model"] == "mock-text"
    return reply.headers["x-request-id"]


def test_keep_alive_serves_lean_posts_then_hands_over_to_aiohttp(stack):
    base = stack.urls["withhold"]
    with connect(base) as sock:
        ids = []
        for path in (OA, AN, OA):
            sock.sendall(lean_post(path))
            ids.append(assert_answered(read_reply(sock)))
        assert isinstance(protocol_of(stack, base, sock), LeanConnection)
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\n\r\n")
        models = read_reply(sock)
        assert models.status == 200 and models.json()["object"] == "list"
        assert isinstance(protocol_of(stack, base, sock), EdgeRequestHandler)
        sock.sendall(lean_post(AN))  # aiohttp's from now on, answered the same
        ids.append(assert_answered(read_reply(sock)))
    assert len(set(ids)) == 4


def test_pipelined_requests_are_answered_in_order(stack):
    base = stack.urls["withhold"]
    with connect(base) as sock:
        sock.sendall(
            lean_post(OA)
            + lean_post(AN)
            + b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"
            + lean_post(OA)
        )
        replies = Replies(sock)
        first, second = replies.next(), replies.next()
        assert_answered(first)
        assert_answered(second)
        assert "choices" in first.json() and second.json()["type"] == "message"
        health = replies.next()
        assert health.status == 200 and health.json()["status"] == "ok"
        assert "choices" in replies.next().json()


def test_a_request_split_into_single_bytes_is_answered(stack):
    base = stack.urls["withhold"]
    data = lean_post(AN) + lean_post(OA)
    with connect(base) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(data)):
            sock.sendall(data[i : i + 1])
        replies = Replies(sock)
        assert replies.next().json()["type"] == "message"
        assert "choices" in replies.next().json()
        assert isinstance(protocol_of(stack, base, sock), LeanConnection)


def test_connection_close_is_honoured(stack):
    with connect(stack.urls["withhold"]) as sock:
        sock.sendall(lean_post(OA, "connection: close\r\n"))
        reply = read_reply(sock)
        assert_answered(reply)
        assert reply.headers["connection"] == "close"
        sock.settimeout(5)
        assert sock.recv(1) == b""  # the server closed it


@pytest.mark.parametrize(
    ("extra", "chunked"),
    [("", True), ("expect: 100-continue\r\n", False), ("x-long: " + "a" * 9000 + "\r\n", False)],
    ids=["chunked", "expect", "long-field"],
)
def test_what_is_not_lean_is_aiohttps_after_a_lean_request(stack, extra, chunked):
    base = stack.urls["withhold"]
    with connect(base) as sock:
        sock.sendall(lean_post(OA))
        assert_answered(read_reply(sock))
        body = valid_body(OA)
        if chunked:
            sock.sendall(post_head(OA, None) + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        else:
            sock.sendall(post_head(OA, len(body), extra) + body)
        replies = Replies(sock)
        reply = replies.next()
        if extra.startswith("expect"):
            assert reply.status == 100
            reply = replies.next()
        if extra.startswith("x-long"):
            assert reply.status == 431  # aiohttp's parser limit, in the client's format
            assert reply.json()["error"]["type"] == "invalid_request_error"
        else:
            assert_answered(reply)
            assert isinstance(protocol_of(stack, base, sock), EdgeRequestHandler)


def test_the_body_is_exactly_its_content_length(stack):
    """The bytes after a body's declared length are the next request, never part of the body."""
    base = stack.urls["withhold"]
    body = orjson.dumps({"model": "mock-text", "messages": [{"role": "user", "content": "x"}]})
    with connect(base) as sock:
        sock.sendall(post_head(OA, len(body) - 1) + body + lean_post(OA))
        replies = Replies(sock)
        short = replies.next()
        assert short.status == 400  # the body cut one byte short is not JSON
        assert short.json()["error"]["type"] == "invalid_request_error"
        # The last byte of the first body began the next request: not HTTP, refused in the
        # OpenAI shape by aiohttp's parser (gateway.edge), and the connection closed.
        refused = replies.next()
        assert refused.status == 400
        assert refused.json()["error"]["type"] == "invalid_request_error"
        sock.settimeout(5)
        assert replies.data == b"" and sock.recv(1) == b""


class _ShortKeepAlive(LoopServers):
    async def _start(self) -> None:
        app = build_app(default_settings(env={}), env={})
        runner = make_runner(app, access_log=None, keepalive_timeout=0.3)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runners.append(runner)
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"


def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default audit store is a file in the working directory
    servers = _ShortKeepAlive()
    servers.start()
    try:
        with connect(servers.url) as sock:
            sock.sendall(lean_post(OA))
            assert_answered(read_reply(sock))
            assert isinstance(protocol_of(servers, servers.url, sock), LeanConnection)
            started = time.monotonic()
            sock.settimeout(10)
            assert sock.recv(1) == b""
            assert time.monotonic() - started >= 0.2
    finally:
        servers.stop()


def test_a_head_that_never_completes_is_closed_after_the_timeout(tmp_path, monkeypatch):
    """Slowloris on a lean connection: half a request line, then nothing, is not held forever."""
    monkeypatch.chdir(tmp_path)
    servers = _ShortKeepAlive()
    servers.start()
    try:
        with connect(servers.url) as sock:
            sock.sendall(b"POST /v1/chat/compl")
            sock.settimeout(10)
            assert sock.recv(1) == b""  # closed by the server, nothing answered
    finally:
        servers.stop()


async def test_a_client_that_sends_ahead_and_never_reads_is_paused_not_buffered():
    """Flow control with a real socket: answers the client does not read fill its socket, writing
    pauses, and from then on what it keeps sending stops being read at about AHEAD_LIMIT."""
    loop = asyncio.get_running_loop()
    answer = b"x" * 65536

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=answer)

    server = EdgeServer(handler, loop=loop)
    server.lean_routes = {"/v1/chat/completions": handler}
    ours, theirs = socket.socketpair()
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    theirs.setblocking(False)
    transport, conn = await loop.connect_accepted_socket(server, ours)
    assert isinstance(conn, LeanConnection)
    request = post_head(OA, 2) + b"{}"
    sent = 0
    try:
        for _ in range(2000):  # ~1.5 MB more than AHEAD_LIMIT once writing is paused
            while True:
                try:
                    sent += theirs.send(request * 8)
                    break
                except BlockingIOError:  # the server stopped reading: what we wanted
                    await asyncio.sleep(0.01)
                    if conn._reading_paused:
                        break
            if conn._reading_paused:
                break
            await asyncio.sleep(0)
        assert conn.writing_paused and conn._reading_paused
        assert len(conn._pending) < AHEAD_LIMIT + 256 * 1024  # + one read
    finally:
        transport.abort()  # at once: answers are still buffered for a peer that never reads
        theirs.close()
