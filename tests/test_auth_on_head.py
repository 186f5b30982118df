"""A request without a valid gateway key is answered 401 on its head, before its body is sent.

The common request (a Content-Length POST, what every SDK sends) is served on the lean path
(gateway.lean_http); after any other request a connection is aiohttp's (gateway.edge). On both,
a head announcing 1 MiB and no body gets its 401 in the client's format at once (with the old
code it waited for the body: these reads time out), says `Connection: close`, and the connection
closes once the rest of the body is dropped. A valid key still gets its answer, its body waited
for. The refusal is one audit record, as before.
"""

from __future__ import annotations

import socket

import orjson
import pytest

from tests.access_util import PATHS, audit_rows, key_table, new_key, payload, serve_keyed
from tests.scenarios import Answer, script_for
from tests.test_http_edge import Replies, Reply, connect, post_head, read_reply

KEY = new_key("head")
WRONG = new_key("wrong")
MIB = 1 << 20
FORMAT = {path: client for client, path in PATHS.items()}


@pytest.fixture(scope="module")
def keyed(stack):
    return serve_keyed(stack, "head", keys=[key_table("team", KEY)])


def open_on(base: str, aiohttp_path: bool) -> socket.socket:
    """A connection on the lean path, or one handed over to aiohttp by a GET first."""
    sock = connect(base)
    sock.settimeout(5)  # a 401 that waits for the body never comes: the read times out
    if aiohttp_path:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
        assert read_reply(sock).status == 200
    return sock


def check_401(reply: Reply, path: str) -> None:
    assert reply.status == 401, reply.body
    assert reply.headers.get("connection") == "close"
    error = reply.json()["error"]
    if FORMAT[path] == "anthropic":
        assert error["type"] == "authentication_error"
    else:
        assert error["code"] == "invalid_api_key"
    assert b"SECRET" not in reply.raw


@pytest.mark.parametrize("aiohttp_path", [False, True], ids=["lean", "aiohttp"])
@pytest.mark.parametrize("path", list(PATHS.values()))
@pytest.mark.parametrize("key", [None, WRONG], ids=["no-key", "wrong-key"])
def test_no_valid_key_is_refused_on_the_head(stack, keyed, path, aiohttp_path, key):
    name, base = keyed
    extra = f"authorization: Bearer {key}\r\n" if key else ""
    with open_on(base, aiohttp_path) as sock:
        sock.sendall(post_head(path, MIB, extra))
        reply = Replies(sock).next()
        check_401(reply, path)
        # The body it announced is dropped as it comes, then the connection closes.
        sock.sendall(b"\0" * MIB)
        assert sock.recv(65536) == b""
    (row,) = audit_rows(stack, name, ids=[reply.headers["x-request-id"]])
    assert row["http_status"] == 401 and row["error_class"] == "Unauthorized"


@pytest.mark.parametrize("aiohttp_path", [False, True], ids=["lean", "aiohttp"])
def test_a_refused_head_with_its_body_following_closes_without_another_answer(
    stack, keyed, aiohttp_path
):
    """What follows the unread body is not read as a request: the connection is closed."""
    _, base = keyed
    path = PATHS["openai"]
    with open_on(base, aiohttp_path) as sock:
        body = b"x" * 1000
        sock.sendall(post_head(path, len(body) + 10) + body)  # 10 bytes short of its length
        replies = Replies(sock)
        check_401(replies.next(), path)
        sock.sendall(b"0123456789" + b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
        while chunk := sock.recv(65536):
            replies.data += chunk
        assert replies.data == b""


@pytest.mark.parametrize("aiohttp_path", [False, True], ids=["lean", "aiohttp"])
@pytest.mark.parametrize("client", list(PATHS))
def test_a_valid_key_waits_for_its_body_and_is_answered(
    stack, keyed, upstream, unique_model, client, aiohttp_path
):
    _, base = keyed
    wire = "anthropic" if client == "anthropic" else "openai"
    model = unique_model("an" if wire == "anthropic" else "oa")
    upstream.script(model, script_for(wire, Answer(text="hello"), model, False))
    body = orjson.dumps(payload(client, model))
    path = PATHS[client]
    with open_on(base, aiohttp_path) as sock:
        sock.sendall(post_head(path, len(body), f"x-api-key: {KEY}\r\n"))
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):  # nothing is answered before the body
            sock.recv(1)
        sock.settimeout(5)
        sock.sendall(body)
        replies = Replies(sock)
        reply = replies.next()
        assert reply.status == 200, reply.body
        assert reply.headers.get("connection") != "close"
        sock.sendall(post_head(path, len(body), f"x-api-key: {KEY}\r\n") + body)  # kept alive
        assert replies.next().status == 200
