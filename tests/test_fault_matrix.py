"""Every fault ends cleanly: a table of upstream and client faults, each cell checked three ways.

The gateways run in front of `tests/fault_upstream.py`, a raw-socket upstream that resets,
closes, stalls, dribbles and sends bytes that are not its wire's. Clients are raw HTTP
(`http.client`, or a bare socket where the fault is the client's) on every endpoint: Chat
Completions, Messages and Responses, each against an OpenAI-wire and an Anthropic-wire upstream,
streaming and not. Every cell checks:

- what the client saw: the answer whole, or its own format's error JSON with the mapped status
  (and `retry-after` kept), or, once a stream had started, its own format's error event at the
  end of a properly ended body (never a socket closed mid-body);
- the audit trail: exactly one record for the exchange, with its status, error class, timeout,
  cut and attempts;
- that nothing leaked: the process's open file descriptors and the gateway loop's asyncio tasks
  come back to what they were before the cell, and nothing was logged as an error (no
  "unhandled ..." traceback line, no aiohttp or asyncio error).

The "single" gateway makes one attempt per exchange, so each cell shows how one fault is
reported; the "retry" gateway (three attempts) shows the faults it recovers from transparently.
The cells whose fault is a stall use providers with small timeouts (1 s first byte, 0.25 s
idle) so that they end quickly; no test measures time beyond a generous "not hung" bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests import fault_upstream as fu
from tests.fault_support import (
    BODY_LIMIT,
    CLIENTS,
    PAIRS,
    PREFIX,
    RETRIES,
    SAME_FORMAT,
    SSE,
    FaultStack,
    Reply,
    Usage,
    assert_answer,
    assert_ends_clean,
    assert_error_event,
    chunked_body,
    connect,
    dechunk,
    gateway_of,
    raw_request,
    read_all,
    read_response,
    rows_with_id,
    scripted,
    send,
    settled,
    the_record,
    usage,
    wait_until,
)
from tests.test_bad_input import assert_error


@pytest.fixture(scope="module")
def fstack(tmp_path_factory: pytest.TempPathFactory):
    s = FaultStack(tmp_path_factory.mktemp("faults"))
    s.start()
    for gateway in RETRIES:  # warm-up: stores open, sessions made, every code path imported
        for client in CLIENTS.values():
            for wire in PREFIX:
                for stream in (False, True):
                    model = scripted(s, wire, fu.answer())
                    assert send(s, client, model, stream, gateway).status == 200
    yield s
    s.stop()


@pytest.fixture
def before(fstack: FaultStack, caplog: pytest.LogCaptureFixture) -> Usage:
    """What is open before the cell (once the previous one settled)."""
    caplog.set_level(logging.WARNING)
    return settled(fstack, usage(fstack), wait=0.2)


# --- upstream faults, one attempt ----------------------------------------------------------------


@dataclass(frozen=True)
class Answered:
    """The client gets the whole answer."""

    text: str


@dataclass(frozen=True)
class Refused:
    """Nothing had reached the client: it gets an HTTP error in its own format."""

    status: int
    error_class: str | None  # None: any upstream error class (see the cell's comment)
    outcome: str  # the attempt's outcome in the record
    timeout: str | None = None


@dataclass(frozen=True)
class Broken:
    """The stream had begun: it ends with the format's error event; the record says cut."""

    error_class: str
    cut_reason: str
    timeout: str | None = None


Expect = Answered | Refused | Broken
HUGE = 10 * 1024 * 1024


@dataclass(frozen=True)
class Fault:
    name: str
    play: Callable[[], fu.Play]
    whole: Expect | None  # None: the fault has no whole-body form
    stream: Expect | None
    quick: bool = False  # a stall: through the providers with small timeouts


UNREACHABLE = Refused(502, "UpstreamUnreachable", "unreachable")
FAULTS = [
    Fault(
        "reset-mid-body",
        fu.reset_mid_body,
        whole=UNREACHABLE,
        stream=Broken("stream_connection_lost", "connection_lost"),
    ),
    Fault(
        "end-without-terminator",
        fu.end_mid_stream,
        whole=None,  # a whole body has no terminator (half a body is not JSON: non-json-200)
        stream=Broken("stream_truncated", "missing_terminator"),
    ),
    Fault("reset-before-head", fu.reset_before_head, whole=UNREACHABLE, stream=UNREACHABLE),
    Fault("close-after-headers", fu.close_after_headers, whole=UNREACHABLE, stream=UNREACHABLE),
    Fault(
        "stall-before-first-byte",
        fu.stall_before_head,
        whole=Refused(504, "UpstreamTimeout", "timeout", "first_byte"),
        stream=Refused(504, "UpstreamTimeout", "timeout", "first_byte"),
        quick=True,
    ),
    Fault(
        "stall-mid-body",
        fu.stall_mid_body,
        whole=Refused(504, "UpstreamTimeout", "timeout", "idle"),
        stream=Broken("stream_timeout", "upstream_timeout", "idle"),
        quick=True,
    ),
    Fault("dribble", lambda: fu.dribble("slow"), whole=Answered("slow"), stream=Answered("slow")),
    Fault(
        "garbage-lines",
        lambda: fu.with_garbage_lines("garbled but whole"),
        whole=None,
        stream=Answered("garbled but whole"),
    ),
    Fault(
        "invalid-json-event",
        lambda: fu.invalid_json_after(3),
        whole=None,
        stream=Broken("stream_protocol", "upstream_error"),
    ),
    Fault(
        "non-json-200",
        lambda: fu.raw_body(200, b"this is not JSON, nor SSE", fu.JSON),
        whole=Refused(502, "UpstreamProtocolError", "protocol_error"),
        # A stream without a single event: a 502 naming the missing terminator, a protocol
        # error as a whole body's is (not an error status the upstream never sent).
        stream=Refused(502, "UpstreamProtocolError", "protocol_error"),
    ),
    Fault(
        "html-502-from-a-proxy",
        lambda: fu.raw_body(
            502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"
        ),
        whole=Refused(502, "UpstreamStatusError", "error_status"),
        stream=Refused(502, "UpstreamStatusError", "error_status"),
    ),
    Fault(
        "10MB-single-event",
        lambda: fu.huge_text(HUGE),
        whole=Answered("x" * HUGE),
        stream=Answered("x" * HUGE),
    ),
]


def upstream_cells() -> list[Any]:
    cells = []
    for fault in FAULTS:
        for stream, expect in ((False, fault.whole), (True, fault.stream)):
            if expect is None:
                continue
            for client, wire in PAIRS:
                mode = "stream" if stream else "whole"
                cell_id = f"{fault.name}-{mode}-{client}-from-{wire}"
                cells.append(pytest.param(fault, stream, expect, client, wire, id=cell_id))
    return cells


@pytest.mark.parametrize(("fault", "stream", "expect", "client", "wire"), upstream_cells())
def test_upstream_fault(fstack, before, caplog, fault, stream, expect, client, wire):
    """One upstream fault, one attempt: what the client saw, the record, nothing leaked."""
    model = scripted(fstack, wire, fault.play(), quick=fault.quick)

    reply = send(fstack, CLIENTS[client], model, stream)

    record = the_record(fstack, model)
    assert record["http_status"] == reply.status
    assert len(fstack.faults.seen[model].requests) == 1
    if isinstance(expect, Answered):
        assert_answer(CLIENTS[client], reply, stream, expect.text)
        assert (record["error_class"], record["truncated"], record["ended_by"]) == (None, 0, None)
        assert record["stop_reason"] == "stop"
        assert [a["outcome"] for a in record["attempts"]] == ["answered"]
    elif isinstance(expect, Refused):
        shape, provider = CLIENTS[client].errors, record["provider"]
        status = expect.status
        error = assert_error(shape, reply.status, reply.headers, reply.body, status, provider)
        assert b"<html" not in reply.body  # an upstream's page never reaches the client
        assert reply.headers["x-request-id"] == record["id"]
        assert error["message"]
        if expect.error_class is None:
            assert record["error_class"].startswith("Upstream"), record["error_class"]
        else:
            assert record["error_class"] == expect.error_class
        assert (record["timeout"], record["ended_by"]) == (expect.timeout, None)
        attempts = record["attempts"]
        assert [(a["outcome"], a.get("timeout")) for a in attempts] == [
            (expect.outcome, expect.timeout)
        ]
    else:
        error = assert_error_event(CLIENTS[client], reply)
        assert error["message"]
        assert reply.headers["x-request-id"] == record["id"]
        assert (record["error_class"], record["timeout"]) == (expect.error_class, expect.timeout)
        assert (record["truncated"], record["cut_reason"]) == (1, expect.cut_reason)
        assert gateway_of(CLIENTS[client], reply)["cut_reason"] == expect.cut_reason
        assert (record["stop_reason"], record["ended_by"]) == ("error", None)
        assert [a["outcome"] for a in record["attempts"]] == ["broken"]
    assert_ends_clean(fstack, before, caplog, model)


# --- upstream error statuses ---------------------------------------------------------------------

# An upstream's error status as a client of the other wire gets it, re-rendered in its own
# format: (status, error type) for the OpenAI shape (Chat Completions, Responses) and for the
# Anthropic one (gateway/encode/*_errors.py). A client of the upstream's own wire gets the
# upstream's status and body unchanged.
RENDERED = {
    400: ((400, "invalid_request_error"), (400, "invalid_request_error")),
    401: ((401, "authentication_error"), (401, "authentication_error")),
    403: ((403, "permission_error"), (403, "permission_error")),
    404: ((404, "invalid_request_error"), (404, "not_found_error")),
    408: ((408, "invalid_request_error"), (408, "invalid_request_error")),
    409: ((409, "conflict_error"), (409, "invalid_request_error")),
    413: ((413, "invalid_request_error"), (413, "request_too_large")),
    422: ((422, "invalid_request_error"), (422, "invalid_request_error")),
    429: ((429, "rate_limit_error"), (429, "rate_limit_error")),
    500: ((500, "server_error"), (500, "api_error")),
    502: ((502, "upstream_error"), (502, "api_error")),
    503: ((503, "service_unavailable_error"), (503, "overloaded_error")),
    504: ((504, "timeout_error"), (504, "timeout_error")),
    529: ((503, "service_unavailable_error"), (529, "overloaded_error")),  # openai: no 529 class
}


def status_cells() -> list[Any]:
    """Each status for each pair, twice: a whole request without `retry-after`, and a stream
    request with one (a stream that never started must still be an HTTP error)."""
    cells = []
    for status in RENDERED:
        for stream, retry_after in ((False, None), (True, "7")):
            for client, wire in PAIRS:
                mode = "stream-retry-after" if stream else "whole"
                cell_id = f"{status}-{mode}-{client}-from-{wire}"
                cells.append(pytest.param(status, stream, retry_after, client, wire, id=cell_id))
    return cells


@pytest.mark.parametrize(("status", "stream", "retry_after", "client", "wire"), status_cells())
def test_upstream_error_status(fstack, before, caplog, status, stream, retry_after, client, wire):
    """An upstream error status is the client's own error JSON with the mapped status (the
    upstream's body as is for a client of its wire), `retry-after` kept, one attempt recorded."""
    model = scripted(fstack, wire, fu.error_status(status, retry_after))
    shape = CLIENTS[client].errors

    reply = send(fstack, CLIENTS[client], model, stream)

    provider = the_record(fstack, model)["provider"]
    if (client, wire) in SAME_FORMAT:
        assert_error(shape, reply.status, reply.headers, reply.body, status, provider)
        # The upstream's body as it was sent, the `gateway` member added.
        assert reply.body.startswith(fu.error_body(wire, status).rstrip()[:-1] + b',"gateway":')
    else:
        expected, kind = RENDERED[status][shape == "anthropic"]
        error = assert_error(shape, reply.status, reply.headers, reply.body, expected, provider)
        assert (error["type"], error["message"]) == (kind, f"upstream said {status}")
    assert reply.headers.get("retry-after") == retry_after
    record = the_record(fstack, model)
    assert (record["id"], record["http_status"]) == (reply.headers["x-request-id"], reply.status)
    assert (record["error_class"], record["truncated"]) == ("UpstreamStatusError", 0)
    assert [(a["outcome"], a["status"]) for a in record["attempts"]] == [("error_status", status)]
    assert_ends_clean(fstack, before, caplog, model)


# --- recovered by a retry, before the first byte ------------------------------------------------

# (fault, the first attempt's outcome and timeout, modes); the stall goes through the quick
# providers, the others through the calm ones.
RECOVERIES = [
    ("reset-before-head", fu.reset_before_head, ("unreachable", None), (False, True)),
    ("close-after-headers", fu.close_after_headers, ("unreachable", None), (False, True)),
    ("reset-mid-body", fu.reset_mid_body, ("unreachable", None), (False,)),
    ("stall-before-first-byte", fu.stall_before_head, ("timeout", "first_byte"), (False, True)),
    ("503-retry-after-0", lambda: fu.error_status(503, "0"), ("error_status", None), (False, True)),
]
CROSS_AND_SAME = [(c, w) for c, w in PAIRS if c != "responses"]


def recovery_cells() -> list[Any]:
    cells = []
    for name, play, first, modes in RECOVERIES:
        for stream in modes:
            for client, wire in CROSS_AND_SAME:
                mode = "stream" if stream else "whole"
                cell_id = f"{name}-{mode}-{client}-from-{wire}"
                cells.append(pytest.param(play, first, stream, client, wire, id=cell_id))
    return cells


@pytest.mark.parametrize(("play", "first", "stream", "client", "wire"), recovery_cells())
def test_a_fault_before_the_first_byte_is_retried_transparently(
    fstack, before, caplog, play, first, stream, client, wire
):
    """With retries on, a fault before any byte reached the client is another attempt: the
    client gets the whole answer and never sees the fault; the record lists both attempts."""
    quick = play is fu.stall_before_head
    model = scripted(fstack, wire, play(), fu.answer("recovered"), quick=quick)

    reply = send(fstack, CLIENTS[client], model, stream, "retry")

    assert_answer(CLIENTS[client], reply, stream, "recovered")
    assert len(fstack.faults.seen[model].requests) == 2
    record = the_record(fstack, model, "retry")
    assert [(a["outcome"], a.get("timeout")) for a in record["attempts"]] == [
        first,
        ("answered", None),
    ]
    assert (record["http_status"], record["error_class"], record["timeout"]) == (200, None, None)
    assert (record["truncated"], record["stop_reason"]) == (0, "stop")
    assert_ends_clean(fstack, before, caplog, model, gateway="retry")


@pytest.mark.parametrize(("client", "wire"), CROSS_AND_SAME)
def test_a_stream_broken_after_its_first_byte_is_not_retried(fstack, before, caplog, client, wire):
    """Retries on, but bytes had reached the client: the stream ends with the format's error
    event, the upstream saw one request, and the record lists one broken attempt."""
    model = scripted(fstack, wire, fu.reset_mid_body(), fu.answer("too late"))

    reply = send(fstack, CLIENTS[client], model, True, "retry")

    assert_error_event(CLIENTS[client], reply)
    assert len(fstack.faults.seen[model].requests) == 1
    record = the_record(fstack, model, "retry")
    assert [a["outcome"] for a in record["attempts"]] == ["broken"]
    assert (record["truncated"], record["error_class"]) == (1, "stream_connection_lost")
    assert_ends_clean(fstack, before, caplog, model, gateway="retry")


LEAVING = [
    ("chat", "openai"),
    ("chat", "anthropic"),
    ("messages", "anthropic"),
    ("messages", "openai"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(("client", "wire"), LEAVING)
def test_a_client_that_leaves_before_the_headers(fstack, before, caplog, client, wire, stream):
    """The client closes while the upstream is silent: the upstream request is closed, the
    record says the client ended it (499, attempt `client_left`), nothing stays open."""
    model = scripted(fstack, wire, fu.stall_before_head())
    seen = fstack.faults.seen[model]

    with connect(fstack) as sock:
        sock.sendall(raw_request(CLIENTS[client], model, stream))
        wait_until(lambda: bool(seen.requests), "sent upstream")

    wait_until(lambda: seen.peer_closed == 1, "closed upstream")
    record = the_record(fstack, model)
    assert (record["ended_by"], record["client_aborted"], record["http_status"]) == (
        "client",
        1,
        499,
    )
    assert [a["outcome"] for a in record["attempts"]] == ["client_left"]
    assert_ends_clean(fstack, before, caplog, model)


@pytest.mark.parametrize(("client", "wire"), LEAVING)
def test_a_client_that_leaves_mid_stream(fstack, before, caplog, client, wire):
    """The client closes after the stream began: the upstream request is closed, the record
    keeps the 200 the client got and says the client cut it."""
    model = scripted(fstack, wire, fu.stall_mid_body())
    seen = fstack.faults.seen[model]

    with connect(fstack) as sock:
        sock.sendall(raw_request(CLIENTS[client], model, True))
        data = b""
        while b"\r\n\r\n" not in data or not data.partition(b"\r\n\r\n")[2]:
            data += sock.recv(4096)
        assert data.startswith(b"HTTP/1.1 200")

    wait_until(lambda: seen.peer_closed == 1, "closed upstream")
    record = the_record(fstack, model)
    assert (record["ended_by"], record["client_aborted"], record["http_status"]) == (
        "client",
        1,
        200,
    )
    assert (record["truncated"], record["cut_reason"]) == (1, "cancelled")
    assert_ends_clean(fstack, before, caplog, model)


@pytest.mark.parametrize("client", ["chat", "messages", "responses"])
def test_a_slow_reader_with_a_tiny_buffer_gets_the_whole_stream(fstack, before, caplog, client):
    """A client with a 2 KB receive buffer reading 7 bytes at a time still gets every event,
    in order, up to the format's terminator."""
    text = "word " * 1500  # 1500 text events
    model = scripted(fstack, "openai", fu.answer(text))

    with connect(fstack, rcvbuf=2048) as sock:
        sock.sendall(raw_request(CLIENTS[client], model, True))
        status, body = dechunk(read_all(sock, size=7))

    assert_answer(CLIENTS[client], Reply(status, {"content-type": SSE}, body), True, text)
    record = the_record(fstack, model)
    assert (record["error_class"], record["stop_reason"], record["ended_by"]) == (
        None,
        "stop",
        None,
    )
    assert_ends_clean(fstack, before, caplog, model)


@pytest.mark.parametrize("client", ["chat", "messages"])
def test_a_client_too_slow_for_the_buffers_holds_the_gateway_not_the_idle_timeout(
    fstack, before, caplog, client
):
    """12 MB in 1 MB events, to a client that reads nothing for a second (five idle timeouts):
    more than the sockets buffer, so the gateway waits on the client, and that wait is not an
    upstream stall: the stream completes."""
    size, pause = 12 * 1024 * 1024, 1.0
    model = scripted(fstack, "openai", fu.huge_text(size, events=12), quick=True)

    with connect(fstack, rcvbuf=2048) as sock:
        sock.sendall(raw_request(CLIENTS[client], model, True))
        first = sock.recv(16)
        time.sleep(pause)
        resumed = time.time()
        status, body = dechunk(first + read_all(sock))

    assert_answer(CLIENTS[client], Reply(status, {"content-type": SSE}, body), True, "x" * size)
    record = the_record(fstack, model)
    assert record["ended_at"] > resumed, "the buffers took it all: the gateway was never held"
    assert (record["error_class"], record["timeout"], record["stop_reason"]) == (None, None, "stop")
    assert_ends_clean(fstack, before, caplog, model)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("client", ["chat", "messages", "responses"])
def test_an_oversized_body_is_a_413_in_the_format(fstack, before, caplog, client, framing):
    """A body over `max_body_bytes`, sent whole (with its length, or chunked): a 413 in the
    endpoint's format, and its record."""
    fmt = CLIENTS[client]
    body = b'{"model": "coa-big", "input": "' + b"x" * (BODY_LIMIT + 1) + b'"}'
    head = f"POST {fmt.path} HTTP/1.1\r\nHost: gateway\r\ncontent-type: application/json\r\n"
    if framing == "chunked":
        data = f"{head}transfer-encoding: chunked\r\n\r\n".encode() + chunked_body(body)
    else:
        data = f"{head}content-length: {len(body)}\r\n\r\n".encode() + body

    with connect(fstack) as sock:
        sock.sendall(data)
        reply = read_response(sock)

    error = assert_error(fmt.errors, reply.status, reply.headers, reply.body, 413)
    kind = "request_too_large" if fmt.errors == "anthropic" else "invalid_request_error"
    assert error["type"] == kind
    rows = rows_with_id(fstack.audit_db("single"), reply.headers["x-request-id"])
    assert [(r["http_status"], r["error_class"]) for r in rows] == [(413, "RequestTooLarge")]
    assert_ends_clean(fstack, before, caplog)


def test_hundreds_of_idle_connections_do_not_stop_a_normal_request(fstack, before, caplog):
    """Slowloris: 300 connections that send half a request line and stall are held without a
    task each, a normal request is still served meanwhile, and closing them frees every
    descriptor and task."""
    model = scripted(fstack, "openai", fu.answer("served"))
    idle = []
    try:
        for _ in range(300):
            sock = connect(fstack)
            sock.sendall(b"POST /v1/chat/compl")
            idle.append(sock)
        # Both ends of each are open in this process once the gateway accepted them all.
        wait_until(lambda: usage(fstack).fds >= before.fds + 600, "all accepted")

        reply = send(fstack, CLIENTS["chat"], model, False)

        assert_answer(CLIENTS["chat"], reply, False, "served")
        # Still held, and waiting costs them no task: a connection's head is parsed from its
        # bytes on arrival (gateway.lean_http), not by a task per connection.
        held = usage(fstack)
        assert held.fds >= before.fds + 600
        assert held.tasks <= before.tasks
    finally:
        for sock in idle:
            sock.close()
    assert_ends_clean(fstack, before, caplog, model)
