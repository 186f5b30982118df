"""What the HTTP server itself refuses reaches the client in the called endpoint's error format.

Raw sockets against the real test stack (tests/conftest.py, served through
`gateway.edge.make_runner`): a body over the size limit, plain or compressed (a gzip bomb is
refused after a bounded amount of inflation), a request line or header fields over the parser's
limits, malformed HTTP. Each answer has the right status, the endpoint's error JSON, a fresh
`x-request-id`, and never a byte of what the client sent in its headers; the refused body of a
real exchange is in the audit trail with status 413.
"""

from __future__ import annotations

import functools
import gzip
import logging
import socket
import sqlite3
import struct
import time
import zlib
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import orjson
import pytest
from aiohttp import compression_utils

from tests.test_bad_input import assert_error
from tests.test_log_safety import assert_no_secret

OA = "/v1/chat/completions"
AN = "/v1/messages"
LIMIT = 64 * 1024 * 1024  # the app's client_max_size
SECRET = "sk-ant-client-SECRET-edge-0003"
AV = "anthropic-version: 2023-06-01\r\n"


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes, raw: bytes) -> None:
        self.status, self.headers, self.body, self.raw = status, headers, body, raw

    def json(self) -> Any:
        return orjson.loads(self.body)


class Replies:
    """Responses read in order from one socket, keeping what arrived beyond each (pipelining)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.data = sock, b""

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, f"connection closed before a response: {self.data!r}"
        self.data += chunk

    def next(self) -> Reply:
        while b"\r\n\r\n" not in self.data:
            self._more()
        head, _, rest = self.data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            self._more()
            rest = self.data.partition(b"\r\n\r\n")[2]
        self.data = rest[length:]
        return Reply(int(lines[0].split(" ")[1]), headers, rest[:length], head + rest[:length])


def read_reply(sock: socket.socket) -> Reply:
    """One HTTP/1.x response with a Content-Length body, read from a raw socket; its `raw` holds
    whatever else arrived with it too."""
    replies = Replies(sock)
    reply = replies.next()
    reply.raw += replies.data
    return reply


def connect(base: str) -> socket.socket:
    url = urlsplit(base)
    sock = socket.create_connection((url.hostname, url.port), timeout=15)
    return sock


def exchange(base: str, data: bytes) -> Reply:
    with connect(base) as sock:
        sock.sendall(data)
        return read_reply(sock)


def post_head(path: str, length: int | None, extra: str = "", encoding: str | None = None) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: gateway\r\ncontent-type: application/json\r\n"
    if path == AN:
        head += AV
    if encoding:
        head += f"content-encoding: {encoding}\r\n"
    if length is None:
        head += "transfer-encoding: chunked\r\n"
    else:
        head += f"content-length: {length}\r\n"
    return (head + extra + "\r\n").encode()


def post(base: str, path: str, body: bytes, encoding: str | None = None) -> Reply:
    return exchange(base, post_head(path, len(body), encoding=encoding) + body)


def check_error(reply: Reply, fmt: str, status: int) -> dict[str, Any]:
    """The format's error JSON, a fresh request id, nothing of the client's headers."""
    error = assert_error(fmt, reply.status, reply.headers, reply.body, status)
    request_id = reply.headers.get("x-request-id", "")
    assert len(request_id) >= 16, reply.headers
    if fmt == "anthropic":
        assert reply.json()["request_id"] == request_id
    else:
        assert set(error) == {"message", "type", "param", "code"}, error
    assert SECRET.encode() not in reply.raw
    assert b"SECRET" not in reply.raw
    return error


def audit_row(stack: Any, request_id: str, timeout: float = 5.0) -> tuple[Any, ...]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(stack.audit_db()) as conn:
            row = conn.execute(
                "select http_status, error_class, client_format from audit_records where id = ?",
                (request_id,),
            ).fetchone()
        if row is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"no audit record {request_id}")


MIB = 1 << 20


def _deflated_zeros(mib: int) -> bytes:
    """A raw deflate stream of `mib` MiB of zeros, about 1 KB a MiB, without compressing it
    all: after a full flush each MiB compresses to the same bytes."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(MIB)) + c.flush(zlib.Z_FULL_FLUSH)
    return block * mib + c.flush()


@functools.cache
def gzip_bomb(mib: int) -> bytes:
    """About mib KB of gzip that inflate to `mib` MiB of zeros."""
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(bytes(MIB), crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + _deflated_zeros(mib) + struct.pack("<II", crc, (mib * MIB) & 0xFFFFFFFF)


@functools.cache
def deflate_bomb(mib: int) -> bytes:
    """The same in the zlib format (`Content-Encoding: deflate`)."""
    adler = 1
    for _ in range(mib):
        adler = zlib.adler32(bytes(MIB), adler)
    return b"\x78\xda" + _deflated_zeros(mib) + struct.pack(">I", adler)


def test_the_bombs_are_what_they_say():
    assert gzip.decompress(gzip_bomb(3)) == bytes(3 * MIB)
    assert zlib.decompress(deflate_bomb(3)) == bytes(3 * MIB)


def valid_body(path: str) -> bytes:
    body: dict[str, Any] = {"model": "mock-text", "messages": [{"role": "user", "content": "hi"}]}
    if path == AN:
        body["max_tokens"] = 32
    return orjson.dumps(body)


FORMAT = {OA: "openai", AN: "anthropic"}
TOO_LARGE_TYPE = {OA: "invalid_request_error", AN: "request_too_large"}


# --- bodies over the limit ----------------------------------------------------------------------


@pytest.mark.parametrize("path", [OA, AN])
def test_declared_length_over_the_limit_is_refused_before_reading(stack, path):
    # Only the head is sent: the refusal must not wait for 64 MiB that never come.
    reply = exchange(stack.urls["withhold"], post_head(path, LIMIT + 1) + b'{"model":')
    error = check_error(reply, FORMAT[path], 413)
    assert error["type"] == TOO_LARGE_TYPE[path]
    status, error_class, client_format = audit_row(stack, reply.headers["x-request-id"])
    assert (status, error_class, client_format) == (413, "RequestTooLarge", FORMAT[path])


def test_chunked_body_over_the_limit_is_a_413_in_the_audit_trail(stack):
    body = b" " * (LIMIT + 1)
    data = post_head(OA, None) + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    reply = exchange(stack.urls["withhold"], data)
    error = check_error(reply, "openai", 413)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "request_too_large"
    status, error_class, _ = audit_row(stack, reply.headers["x-request-id"])
    assert (status, error_class) == (413, "RequestTooLarge")


@pytest.mark.parametrize("path", [OA, AN])
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compression_bomb_is_a_413_after_bounded_inflation(stack, path, encoding):
    bomb = (gzip_bomb if encoding == "gzip" else deflate_bomb)(4 * LIMIT // MIB)
    assert len(bomb) < MIB // 3  # a quarter of a MB that would inflate to 256 MiB
    reply = post(stack.urls["withhold"], path, bomb, encoding)
    error = check_error(reply, FORMAT[path], 413)
    assert error["type"] == TOO_LARGE_TYPE[path]
    status, error_class, _ = audit_row(stack, reply.headers["x-request-id"])
    assert (status, error_class) == (413, "RequestTooLarge")


def compress_other(encoding: str, raw: bytes) -> bytes:
    if encoding == "br":
        import brotli  # type: ignore[import-not-found]

        return brotli.compress(raw)
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        from backports import zstd  # type: ignore[import-not-found,no-redef]
    return zstd.compress(raw)


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_other_codecs_are_bounded_or_refused(stack, encoding):
    available = {"br": compression_utils.HAS_BROTLI, "zstd": compression_utils.HAS_ZSTD}
    if available[encoding]:
        bomb = compress_other(encoding, bytes(2 * LIMIT))
        reply = post(stack.urls["withhold"], AN, bomb, encoding)
        check_error(reply, "anthropic", 413)
    else:  # aiohttp cannot inflate it: refused, in the endpoint's format
        reply = post(stack.urls["withhold"], AN, b"\x00not compressed", encoding)
        check_error(reply, "anthropic", 400)


@pytest.mark.parametrize("path", [OA, AN])
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_small_compressed_body_still_works(stack, path, encoding):
    raw = valid_body(path)
    body = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)
    reply = post(stack.urls["withhold"], path, body, encoding)
    assert reply.status == 200, reply.body
    assert reply.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize("path", [OA, AN])
def test_corrupt_compressed_body_is_a_400(stack, path):
    body = gzip.compress(valid_body(path))
    body = body[:10] + bytes(b ^ 0x5A for b in body[10:])
    reply = post(stack.urls["withhold"], path, body, "gzip")
    check_error(reply, FORMAT[path], 400)


# --- what the HTTP parser refuses ---------------------------------------------------------------


def long_header(name: str = "x-api-key") -> str:
    return f"{name}: {SECRET}{'k' * 9000}\r\n"


@pytest.mark.parametrize(
    ("path", "extra", "fmt"),
    [
        (OA, "", "openai"),
        (AN, "", "anthropic"),
        ("/v1/models", AV, "anthropic"),  # anthropic-version marks an Anthropic client
    ],
)
def test_header_field_too_large_is_a_431_in_the_endpoint_format(stack, path, extra, fmt):
    head = f"POST {path} HTTP/1.1\r\nHost: gateway\r\n{extra}{long_header()}"
    with connect(stack.urls["withhold"]) as sock:
        sock.sendall((head + "content-length: 2\r\n\r\n{}").encode())
        reply = read_reply(sock)
        assert sock.recv(1) == b""  # and the connection is closed
    error = check_error(reply, fmt, 431)
    assert error["type"] == "invalid_request_error"


def test_long_authorization_header_is_not_echoed_or_logged(stack, caplog):
    caplog.set_level(logging.DEBUG)
    head = f"POST {OA} HTTP/1.1\r\nHost: gateway\r\nauthorization: Bearer {SECRET}{'k' * 9000}"
    reply = exchange(stack.urls["withhold"], (head + "\r\ncontent-length: 2\r\n\r\n{}").encode())
    check_error(reply, "openai", 431)
    assert_no_secret(caplog, (SECRET,))


@pytest.mark.parametrize(("path", "fmt"), [(OA, "openai"), (AN, "anthropic")])
def test_too_many_headers_is_a_431(stack, path, fmt):
    many = "".join(f"x-filler-{n}: {SECRET}\r\n" for n in range(200))
    head = f"POST {path} HTTP/1.1\r\nHost: gateway\r\n{many}content-length: 2\r\n\r\n{{}}"
    reply = exchange(stack.urls["withhold"], head.encode())
    check_error(reply, fmt, 431)


def test_request_line_too_long_is_a_400_in_the_openai_shape(stack, caplog):
    caplog.set_level(logging.DEBUG)
    target = f"/v1/messages?key={SECRET}{'q' * 9000}"
    data = f"POST {target} HTTP/1.1\r\nHost: gateway\r\n{AV}content-length: 2\r\n\r\n{{}}"
    reply = exchange(stack.urls["withhold"], data.encode())
    error = check_error(reply, "openai", 400)  # what both SDKs have a class for
    assert (error["type"], error["code"]) == ("invalid_request_error", "request_line_too_long")
    assert_no_secret(caplog, (SECRET,))


@pytest.mark.parametrize(("path", "fmt"), [(OA, "openai"), (AN, "anthropic")])
@pytest.mark.parametrize(
    "bad",
    [
        f"x-api-key {SECRET}\r\n",  # no colon
        f"x-api-key: {SECRET}\x00\r\n",  # a NUL in the value
        f"x-api\x01-key: {SECRET}\r\n",  # a control character in the name
    ],
    ids=["no-colon", "nul-in-value", "control-in-name"],
)
def test_malformed_header_is_a_400_in_the_endpoint_format(stack, caplog, path, fmt, bad):
    caplog.set_level(logging.DEBUG)
    head = f"POST {path} HTTP/1.1\r\nHost: gateway\r\n{bad}content-length: 2\r\n\r\n{{}}"
    reply = exchange(stack.urls["withhold"], head.encode())
    error = check_error(reply, fmt, 400)
    assert error["type"] == "invalid_request_error"
    assert_no_secret(caplog, (SECRET,))


@pytest.mark.parametrize(
    "data",
    [
        f"\x16\x03\x01\x02\x00{SECRET}\r\n\r\n".encode(),  # TLS on the plain port
        f"GARBAGE {SECRET}\r\n\r\n".encode(),
        f"POST /v1/messages HTTP/9.9\r\nx-api-key: {SECRET}\r\n\r\n".encode(),
    ],
    ids=["tls", "garbage", "bad-version"],
)
def test_not_http_is_a_400_in_the_openai_shape(stack, data):
    reply = exchange(stack.urls["withhold"], data)
    check_error(reply, "openai", 400)


def test_a_bad_request_after_a_good_one_on_the_same_connection(stack):
    with connect(stack.urls["withhold"]) as sock:
        body = valid_body(AN)
        sock.sendall(post_head(AN, len(body)) + body)
        first = read_reply(sock)
        assert first.status == 200, first.body
        head = f"POST {AN} HTTP/1.1\r\nHost: gateway\r\n{long_header()}content-length: 2\r\n"
        sock.sendall(head.encode() + b"\r\n{}")
        check_error(read_reply(sock), "anthropic", 431)


# --- through the real SDKs ----------------------------------------------------------------------


def test_openai_sdk_sees_a_431_with_the_error_fields(stack):
    client = openai.OpenAI(
        base_url=stack.urls["withhold"] + "/v1",
        api_key="sk-client",
        max_retries=0,
        default_headers={"x-filler": "k" * 9000},
    )
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(
            model="mock-text", messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 431
    assert info.value.code == "header_fields_too_large"
    assert info.value.type == "invalid_request_error"


def test_anthropic_sdk_sees_a_431_with_the_error_fields(stack):
    client = anthropic.Anthropic(
        base_url=stack.urls["withhold"],
        api_key="sk-client",
        max_retries=0,
        default_headers={"x-filler": "k" * 9000},
    )
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(
            model="mock-text", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 431
    # anthropic 2.x has a class for it; older SDKs raise their APIStatusError
    assert isinstance(info.value, getattr(anthropic, "RequestHeaderFieldsTooLargeError", object))
    body = info.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert body["request_id"] == info.value.response.headers["x-request-id"]
