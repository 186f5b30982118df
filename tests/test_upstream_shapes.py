"""An upstream whose JSON is of the wrong shape (a string where an object belongs, a list for
`choices`, a number for text) breaks its own wire: a protocol error of the upstream, never a
crash of the gateway. Whole bodies get a 502 in the client's format; a stream whose first event is
wrong gets a 502 too; one that goes wrong later ends with the format's error event, inside one
well-formed HTTP response (never a second status line in the body). Each exchange is recorded as
cut, with the status the client got. Usage figures the store could not hold (a list, 2^63) are
dropped at the edge, and the answer is kept."""

from __future__ import annotations

import http.client
import json
import sqlite3
import time
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests.scenarios import Answer, anthropic_body, anthropic_events, openai_body, openai_chunks
from tests.test_matrix_support import parse_frames
from tests.upstream import Script, anthropic_sse, openai_sse

TEXT = "Hello there, this is a fine answer."
PREFIX = {"openai": "oa", "anthropic": "an"}


def post(stack: Any, client: str, model: str, stream: bool) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(stack.urls["withhold"])
    messages = [{"role": "user", "content": "hi"}]
    if client == "openai":
        path, body = "/v1/chat/completions", {"model": model, "messages": messages}
        headers = {"authorization": "Bearer sk-client"}
    else:
        path = "/v1/messages"
        body = {"model": model, "max_tokens": 64, "messages": messages}
        headers = {"x-api-key": "sk-client", "anthropic-version": "2023-06-01"}
    if stream:
        body["stream"] = True
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request(
            "POST", path, json.dumps(body), {"content-type": "application/json", **headers}
        )
        response = conn.getresponse()
        raw = response.read()  # raises IncompleteRead on a chunked body left unfinished
        return response.status, {k.lower(): v for k, v in response.getheaders()}, raw
    finally:
        conn.close()


def record(stack: Any, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(stack.audit_db()) as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute("select * from audit_records where id = ?", (request_id,))
            found = row.fetchone()
        if found is not None:
            return dict(found)
        time.sleep(0.05)
    raise AssertionError(f"no audit record {request_id}")


def check_client_error(client: str, status: int, raw: bytes) -> None:
    assert status == 502, raw[:300]
    body = orjson.loads(raw)
    if client == "openai":
        assert body["error"]["type"] == "upstream_error" and body["error"]["message"]
    else:
        assert body["type"] == "error" and body["error"]["type"] == "api_error"


def check_error_event(client: str, raw: bytes) -> None:
    assert b"HTTP/1.1" not in raw  # one response: no second status line inside the body
    frames = parse_frames(raw.decode())
    last = frames[-1]
    if client == "openai":
        assert "[DONE]" not in [f.data for f in frames]
        assert last.json["error"]["message"] and last.json["gateway"]["truncated"] is True
    else:
        assert last.event == "error" and last.json["gateway"]["truncated"] is True
        assert "message_stop" not in [f.event for f in frames]


# --- wrong shapes, per wire ------------------------------------------------------------------

OPENAI_CHUNK_SHAPES = {
    "choices-string": {"choices": "nope"},
    "choices-list-of-numbers": {"choices": [1, 2]},
    "delta-string": {"choices": [{"index": 0, "delta": "text"}]},
    "content-number": {"choices": [{"index": 0, "delta": {"content": 5}}]},
    "tool_calls-string": {"choices": [{"index": 0, "delta": {"tool_calls": "x"}}]},
    "tool-function-string": {
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]
    },
    "tool-index-string": {
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0", "id": "c"}]}}]
    },
    "index-string": {"choices": [{"index": "0", "delta": {"content": "x"}}]},
    "finish-number": {"choices": [{"index": 0, "delta": {}, "finish_reason": 7}]},
    "usage-string": {"choices": [], "usage": "lots"},
    "id-object": {"id": {"a": 1}, "choices": []},
    "not-an-object": ["a", "list"],
}


def block_delta(index: Any, delta: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


ANTHROPIC_EVENT_SHAPES = {
    "message-string": {"type": "message_start", "message": "hello"},
    "content_block-string": {"type": "content_block_start", "index": 5, "content_block": "x"},
    "delta-list": block_delta(0, [1]),
    "text-number": block_delta(0, {"type": "text_delta", "text": 5}),
    "index-string": block_delta("0", {"type": "text_delta", "text": "x"}),
    "block-never-started": block_delta(9, {"type": "text_delta", "text": "x"}),
    "block-started-twice": {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    },
    "stop-index-list": {"type": "content_block_stop", "index": [0]},
    "message_delta-string": {"type": "message_delta", "delta": "end"},
    "stop_reason-number": {"type": "message_delta", "delta": {"stop_reason": 3}},
    "usage-list": {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": [1]},
    "type-number": {"type": 7},
    "not-an-object": "just a string",
}
OPENAI_BODY_SHAPES = {
    "choices-object": {"choices": {"0": {}}},
    "choices-strings": {"choices": ["a"]},
    "message-string": {"choices": [{"index": 0, "message": "hi", "finish_reason": "stop"}]},
    "content-list-of-numbers": {
        "choices": [{"index": 0, "message": {"content": [1]}, "finish_reason": "stop"}]
    },
    "tool_calls-object": {
        "choices": [{"index": 0, "message": {"tool_calls": {"a": 1}}, "finish_reason": "stop"}]
    },
    "finish-list": {"choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": []}]},
    "second-choice-broken": {
        "choices": [
            {"index": 0, "message": {"content": "x"}, "finish_reason": "stop"},
            {"index": 1, "message": {"tool_calls": [{"function": "f"}]}, "finish_reason": "stop"},
        ]
    },
    "a-string": "hello",
}
ANTHROPIC_BODY_SHAPES = {
    "content-string": {"content": "hello", "stop_reason": "end_turn"},
    "content-numbers": {"content": [1, 2], "stop_reason": "end_turn"},
    "text-number": {"content": [{"type": "text", "text": 5}], "stop_reason": "end_turn"},
    "tool-name-object": {
        "content": [{"type": "tool_use", "id": "t", "name": {"x": 1}, "input": {}}],
        "stop_reason": "tool_use",
    },
    "stop_reason-list": {"content": [], "stop_reason": ["end_turn"]},
    "usage-string": {"content": [], "stop_reason": "end_turn", "usage": "many"},
    "a-list": [],
}


def stream_with(wire: str, model: str, bad: Any, position: int) -> Script:
    """A valid text stream with the event at `position` replaced by `bad`."""
    answer = Answer(text=TEXT)
    if wire == "openai":
        frames = openai_sse(openai_chunks(answer, model))
        frames[position] = b"data: " + orjson.dumps(bad) + b"\n\n"
    else:
        frames = anthropic_sse(anthropic_events(answer, model))
        frames[position] = b"event: x\ndata: " + orjson.dumps(bad) + b"\n\n"
    return Script(chunks=frames)


def first_text_frame(wire: str) -> int:
    """Past this frame, text has reached the client (frame indexes of the scenario streams)."""
    return 2 if wire == "openai" else 4


CASES = [
    pytest.param(client, "openai", name, bad, id=f"{client}<-openai-{name}")
    for client in ("openai", "anthropic")
    for name, bad in OPENAI_CHUNK_SHAPES.items()
] + [
    pytest.param(client, "anthropic", name, bad, id=f"{client}<-anthropic-{name}")
    for client in ("openai", "anthropic")
    for name, bad in ANTHROPIC_EVENT_SHAPES.items()
]
# Usage figures of the wrong type are dropped, not a protocol error; a later chunk's id is never
# read (the first one names the response).
HARMLESS = {"usage-string", "usage-list"}
HARMLESS_LATE = HARMLESS | {"id-object"}


@pytest.mark.parametrize(("client", "wire", "name", "bad"), CASES)
def test_a_wrong_shape_late_in_a_stream_ends_it_with_the_formats_error_event(
    stack, upstream, unique_model, client, wire, name, bad
):
    model = unique_model(PREFIX[wire])
    upstream.script(model, stream_with(wire, model, bad, first_text_frame(wire) + 1))
    status, headers, raw = post(stack, client, model, stream=True)
    assert status == 200
    rec = record(stack, headers["x-request-id"])
    if name in HARMLESS_LATE:
        assert b"HTTP/1.1" not in raw
        assert rec["truncated"] == 0 and rec["http_status"] == 200
        return
    check_error_event(client, raw)
    assert (rec["http_status"], rec["truncated"], rec["stop_reason"]) == (200, 1, "error")
    assert rec["error_class"] == "stream_protocol"


LATE_ONLY = {"block-started-twice"}  # first in a stream, it is the first start of its block
FIRST_CASES = [case for case in CASES if case.values[2] not in HARMLESS | LATE_ONLY]


@pytest.mark.parametrize(("client", "wire", "name", "bad"), FIRST_CASES)
def test_a_wrong_first_event_is_a_502_in_the_clients_format(
    stack, upstream, unique_model, client, wire, name, bad
):
    model = unique_model(PREFIX[wire])
    upstream.script(model, stream_with(wire, model, bad, 0))
    status, headers, raw = post(stack, client, model, stream=True)
    check_client_error(client, status, raw)
    rec = record(stack, headers["x-request-id"])
    assert (rec["http_status"], rec["truncated"]) == (502, 1)


BODY_CASES = [
    pytest.param(client, "openai", bad, id=f"{client}<-openai-{name}")
    for client in ("openai", "anthropic")
    for name, bad in OPENAI_BODY_SHAPES.items()
] + [
    pytest.param(client, "anthropic", bad, id=f"{client}<-anthropic-{name}")
    for client in ("openai", "anthropic")
    for name, bad in ANTHROPIC_BODY_SHAPES.items()
    if name != "usage-string"
]


@pytest.mark.parametrize(("client", "wire", "bad"), BODY_CASES)
def test_a_whole_body_of_the_wrong_shape_is_a_502(stack, upstream, unique_model, client, wire, bad):
    model = unique_model(PREFIX[wire])
    valid = (openai_body if wire == "openai" else anthropic_body)(Answer(text=TEXT), model)
    body = {**valid, **bad} if isinstance(bad, dict) else bad
    upstream.script(model, Script(body=orjson.dumps(body)))
    status, headers, raw = post(stack, client, model, stream=False)
    check_client_error(client, status, raw)
    rec = record(stack, headers["x-request-id"])
    assert (rec["http_status"], rec["truncated"]) == (502, 1)


@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("value", [2**63, 2**70, -5, [1, 2], {"n": 1}, 1.5, True])
def test_usage_the_store_cannot_hold_is_dropped_and_the_answer_kept(
    stack, upstream, unique_model, client, wire, value
):
    model = unique_model(PREFIX[wire])
    body = (openai_body if wire == "openai" else anthropic_body)(Answer(text=TEXT), model)
    key = "prompt_tokens" if wire == "openai" else "input_tokens"
    body["usage"][key] = value
    upstream.script(model, Script(body=json.dumps(body).encode()))  # orjson refuses 2**70
    status, headers, raw = post(stack, client, model, stream=False)
    assert status == 200, raw[:300]
    rec = record(stack, headers["x-request-id"])
    assert rec["input_tokens"] is None
    assert rec["output_tokens"] is not None and rec["truncated"] == 0
