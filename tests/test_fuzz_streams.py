"""Whatever bytes an upstream streams, the client gets a well-formed stream of its own format.

Hypothesis builds upstream byte streams from the recorded streams in tests/fixtures: a recorded
stream with events dropped, repeated, swapped, replaced by random bytes or by a `data:` line
that is no JSON, with garbage lines between them; or any sequence of recorded events of the
wire, garbage lines and random bytes. The result is cut at a random byte, split into random
chunks and played by the raw-socket upstream of tests/fault_upstream.py, which then ends the
body cleanly, closes the connection or resets it.

For each (client, wire) pair, through the gateway's relays (same format) and translators
(cross format), the client always gets either a 200 stream that parses as its format (every
`data:` is JSON, event names match their payload's type) and ends with exactly one terminal
event (the normal end, or the format's error event), or an error status with its format's
error JSON; the gateway logs nothing as an error (no "unhandled" traceback line), and the
exchange has exactly one audit record, which agrees with what the client saw.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests import fault_upstream as fu
from tests.fault_support import (
    CLIENTS,
    PAIRS,
    SSE,
    FaultStack,
    Reply,
    error_logs,
    rows_of,
    scripted,
    send,
    sse_events,
    the_record,
)
from tests.fixtures_util import chunked, split_events, stream_body
from tests.test_bad_input import ANY_PROVIDER, assert_error
from tests.test_split_property import STREAMS

EXAMPLES = 40

# Lines an upstream may send between events that are no field a client uses, and some that
# are: a `data:` line that is not JSON, an event name with no data, a stray [DONE].
GARBAGE = [
    b"garbage without a colon",
    b": keep-alive comment",
    b"retry: 10\nid: 7",
    b"event: unknown_event",
    b'data: {"unterminated": ',
    b"data: [DONE]",
    b"data: null",
    b"data: 42",
    b"\xff\xfe\x00",
]


@functools.cache
def recorded(wire: str) -> list[list[bytes]]:
    """The recorded streams of `wire`, each as its list of events."""
    return [split_events(stream_body(name)) for name, w in STREAMS if w == wire]


def some_bytes() -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=24), st.sampled_from(GARBAGE))


@st.composite
def mutated(draw: st.DrawFn, wire: str) -> list[bytes]:
    """A recorded stream with one to three of its events dropped, repeated, swapped with
    another, replaced by random bytes, or with random bytes before them."""
    events = list(draw(st.sampled_from(recorded(wire))))
    for _ in range(draw(st.integers(1, 3))):
        if not events:
            break
        i = draw(st.integers(0, len(events) - 1))
        op = draw(st.sampled_from(["drop", "repeat", "swap", "replace", "insert"]))
        if op == "drop":
            del events[i]
        elif op == "repeat":
            events.insert(i, events[i])
        elif op == "swap":
            j = draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        elif op == "replace":
            events[i] = draw(some_bytes())
        else:
            events.insert(i, draw(some_bytes()))
    return events


@st.composite
def mixture(draw: st.DrawFn, wire: str) -> list[bytes]:
    """Any sequence of the wire's recorded events, garbage lines and random bytes."""
    pool = [event for stream in recorded(wire) for event in stream]
    return draw(st.lists(st.one_of(st.sampled_from(pool), some_bytes()), max_size=12))


@st.composite
def upstream_bytes(draw: st.DrawFn, wire: str) -> tuple[list[bytes], str]:
    """Chunks of an event stream, and how the upstream ends it."""
    events = draw(st.one_of(mutated(wire), mutated(wire), mixture(wire)))
    body = b"".join(event + b"\n\n" for event in events)
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]  # cut anywhere
    points = draw(st.lists(st.integers(0, max(len(body), 1)), max_size=8))
    ending = draw(st.sampled_from(["end", "end", "end", "close", "reset"]))
    return chunked(body, points), ending


# --- what a well-formed stream of each format is ------------------------------------------------


def is_error_event(client: str, name: str | None, data: Any) -> bool:
    if client == "chat":
        return isinstance(data, dict) and "error" in data
    if client == "messages":
        return name == "error"
    return name == "response.failed"


def is_normal_end(client: str, name: str | None, data: Any) -> bool:
    if client == "chat":
        return data == "[DONE]"
    if client == "messages":
        return name == "message_stop"
    return name in ("response.completed", "response.incomplete")


def check_stream(client: str, reply: Reply) -> bool:
    """The stream parses as the client's format and ends with exactly one terminal event;
    whether that was the normal end (else the format's error event)."""
    assert reply.headers["content-type"].startswith(SSE)
    events = sse_events(reply.body)  # every data line is JSON (or [DONE])
    assert events, reply.body[:300]
    for name, data in events:
        if client != "chat":
            assert isinstance(data, dict) and data.get("type") == name, (name, data)
    terminal = [
        n
        for n, (name, data) in enumerate(events)
        if is_error_event(client, name, data) or is_normal_end(client, name, data)
    ]
    if client == "responses" and events[-1][0] == "response.failed":
        assert events[-2][0] == "error"  # the error event, then response.failed
    assert terminal == [len(events) - 1], [name or data for name, data in events][-6:]
    return is_normal_end(client, *events[-1])


def check_record(record: dict[str, Any], reply: Reply, normal_end: bool | None) -> None:
    """The record agrees with the client: its status; a stream that ended with its error event
    is cut and names an error class, one that ended normally names none."""
    assert record["http_status"] == reply.status
    if normal_end is None:  # an error status
        assert record["error_class"] is not None
    elif normal_end:
        assert record["error_class"] is None, record
    else:
        assert record["truncated"] == 1 and record["error_class"] is not None, record


@pytest.fixture(scope="module")
def fstack(tmp_path_factory: pytest.TempPathFactory):
    s = FaultStack(tmp_path_factory.mktemp("fuzz-streams"))
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=[f"{c}-from-{w}" for c, w in PAIRS])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_upstream_stream_reaches_the_client_well_formed(fstack, caplog, client, wire, data):
    chunks, ending = data.draw(upstream_bytes(wire), label="upstream")
    caplog.clear()
    caplog.set_level(logging.WARNING)
    model = scripted(fstack, wire, fu.raw_stream(chunks, ending))

    reply = send(fstack, CLIENTS[client], model, True)

    if reply.status == 200:
        normal_end: bool | None = check_stream(client, reply)
        event(f"200, {'normal end' if normal_end else 'error event'}")
    else:
        shape, status = CLIENTS[client].errors, reply.status
        assert_error(shape, status, reply.headers, reply.body, status, ANY_PROVIDER)
        normal_end = None
        event(f"{reply.status}")
    check_record(the_record(fstack, model), reply, normal_end)
    assert error_logs(caplog) == []
    assert len(rows_of(fstack.audit_db("single"), model)) == 1
