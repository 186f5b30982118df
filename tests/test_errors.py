"""Upstream failures reach the client in its own format, with a real status whenever possible.

Every (client format, upstream wire) pair, streaming and not:
- an upstream error status becomes the client's own error JSON, 4xx kept, 429 with retry-after;
- unreachable -> 502, no answer in time -> 504, unreadable body -> 502;
- a failure before the first byte is a real HTTP status also on a streaming request;
- a failure after the first byte ends the stream with the format's own error event, carrying the
  `gateway` extension object.
"""

from __future__ import annotations

import http.client
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import orjson
import pytest

from tests.conftest import anthropic_client, openai_client
from tests.scenarios import Answer, Tool, anthropic_events, openai_chunks, script_for
from tests.upstream import Script, anthropic_sse, openai_sse

CLIENTS = ("openai", "anthropic")
WIRES = ("openai", "anthropic")
PAIRS = [(c, w) for c in CLIENTS for w in WIRES]
PATH = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
PREFIX = {"openai": "oa", "anthropic": "an"}
SLOW_PREFIX = {"openai": "slow-oa", "anthropic": "slow-an"}
PROVIDER = {"openai": "openai", "anthropic": "anthropic"}
USER = [{"role": "user", "content": "hi"}]
EXT_KEYS = {
    "stop_reason",
    "native_stop_reason",
    "provider",
    "request_id",
    "truncated",
    "withheld_tool_calls",
}
# Anthropic's error types go one to one with statuses.
ANTHROPIC_TYPE_FOR = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


# --- raw HTTP helpers ---------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


def post(base: str, client: str, payload: dict[str, Any]) -> Reply:
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=15)
    headers = {"content-type": "application/json"}
    if client == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        headers["x-api-key"] = "sk-client"
    else:
        headers["authorization"] = "Bearer sk-client"
    try:
        conn.request("POST", PATH[client], body=orjson.dumps(payload), headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        conn.close()


def payload_for(client: str, model: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": USER, "stream": stream}
    if client == "anthropic":
        body["max_tokens"] = 256
    return body


def frames(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) of each SSE frame, comments skipped."""
    out = []
    for block in raw.replace(b"\r\n", b"\n").decode().split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((event, "\n".join(data)))
    return out


def streamed_text(client: str, reply: Reply) -> str:
    text = []
    for event, data in frames(reply.body):
        if data == "[DONE]" or event == "error":
            continue
        obj = orjson.loads(data)
        if client == "openai":
            for choice in obj.get("choices") or []:
                text.append(choice.get("delta", {}).get("content") or "")
        elif obj.get("type") == "content_block_delta" and obj["delta"]["type"] == "text_delta":
            text.append(obj["delta"]["text"])
    return "".join(text)


def streamed_tool_calls(client: str, reply: Reply) -> list[Any]:
    calls = []
    for event, data in frames(reply.body):
        if data == "[DONE]" or event == "error":
            continue
        obj = orjson.loads(data)
        if client == "openai":
            for choice in obj.get("choices") or []:
                calls += choice.get("delta", {}).get("tool_calls") or []
        elif (
            obj.get("type") == "content_block_start" and obj["content_block"]["type"] == "tool_use"
        ):
            calls.append(obj["content_block"])
    return calls


def final_error_event(client: str, reply: Reply) -> dict[str, Any]:
    """The stream's last frame, which must be the format's own error event."""
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    got = frames(reply.body)
    assert got, reply.body
    event, data = got[-1]
    assert data != "[DONE]", "the stream ended with [DONE] instead of an error event"
    obj = orjson.loads(data)
    if client == "openai":
        assert event is None
        assert set(obj["error"]) >= {"message", "type", "code"}, obj
        assert "choices" not in obj
    else:
        assert event == "error"
        assert obj["type"] == "error"
        assert set(obj["error"]) >= {"type", "message"}, obj
    assert isinstance(obj["error"]["message"], str) and obj["error"]["message"]
    return obj


def assert_gateway_ext(obj: dict[str, Any], provider: str) -> dict[str, Any]:
    ext = obj["gateway"]
    assert set(ext) >= EXT_KEYS, ext
    assert ext["provider"] == provider
    assert ext["truncated"] is True
    assert ext["stop_reason"] in ("error", "aborted")
    assert isinstance(ext["request_id"], str) and ext["request_id"]
    return ext


def assert_client_error(client: str, reply: Reply, status: int) -> dict[str, Any]:
    """A JSON error in the client's format, with this status; returns the inner error object."""
    assert reply.status == status, reply.body
    assert reply.headers["content-type"].startswith("application/json"), reply.headers
    assert b"Traceback" not in reply.body
    data = reply.json
    if client == "openai":
        assert "error" in data and "type" not in data, data
        assert {"message", "type", "code"} <= set(data["error"])
    else:
        assert data["type"] == "error", data
        assert {"type", "message"} <= set(data["error"])
    assert isinstance(data["error"]["message"], str) and data["error"]["message"]
    return data["error"]


# --- upstream error bodies ----------------------------------------------------------------------

OPENAI_ERRORS = {
    400: ("invalid_request_error", "invalid_value", "Invalid value for 'temperature'."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-***."),
    404: ("invalid_request_error", "model_not_found", "The model `x` does not exist."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("service_unavailable_error", None, "The engine is currently overloaded."),
}
ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "messages: text content blocks must be non-empty"),
    401: ("authentication_error", "invalid x-api-key"),
    404: ("not_found_error", "model: claude-x"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def upstream_error(wire: str, status: int) -> tuple[bytes, str]:
    """The provider's own error body for this status, and its message."""
    if wire == "openai":
        kind, code, message = OPENAI_ERRORS[status]
        error = {"message": message, "type": kind, "param": None, "code": code}
        return orjson.dumps({"error": error}), message
    kind, message = ANTHROPIC_ERRORS[status]
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_01"}
    return orjson.dumps(body), message


STATUS_CASES = [
    (w, s) for w in WIRES for s in (OPENAI_ERRORS if w == "openai" else ANTHROPIC_ERRORS)
]


def expected_status(client: str, upstream_status: int) -> int | None:
    if upstream_status < 500:
        return upstream_status
    if client == "anthropic" and upstream_status == 529:
        return 529
    return None  # some 5xx


# --- upstream error statuses --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("wire", "status"), STATUS_CASES)
def test_upstream_error_status(stack, upstream, unique_model, client, wire, status, stream):
    model = unique_model(PREFIX[wire])
    body, message = upstream_error(wire, status)
    upstream.script(model, Script(status=status, body=body))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, stream))
    want = expected_status(client, status)
    if want is None:
        assert 500 <= reply.status < 600, reply.status
        want = reply.status
    error = assert_client_error(client, reply, want)
    assert error["message"] == message
    data = reply.json
    ext = data.pop("gateway")  # which upstream failed, in every client's format
    assert (ext["provider"], ext["attempts"][0]["status"]) == (PROVIDER[wire], status)
    if client == wire:
        # Same format: the upstream's own error JSON, passed through, the member added.
        assert data == orjson.loads(body)
        assert reply.body.startswith(body[:-1] + b',"gateway":')
    elif client == "anthropic" and reply.status in ANTHROPIC_TYPE_FOR:
        assert error["type"] == ANTHROPIC_TYPE_FOR[reply.status]
    assert len(upstream.received[model]) == 1


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_rate_limit_keeps_429_and_retry_after(stack, upstream, unique_model, client, wire, stream):
    model = unique_model(PREFIX[wire])
    if wire == "openai":
        error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
        body = orjson.dumps({"error": {**error, "param": None}})
    else:
        error = {"type": "rate_limit_error", "message": "Rate limit reached"}
        body = orjson.dumps({"type": "error", "error": error})
    upstream.script(model, Script(status=429, body=body, headers={"retry-after": "7"}))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, stream))
    error_obj = assert_client_error(client, reply, 429)
    assert reply.headers["retry-after"] == "7"
    assert error_obj["message"] == "Rate limit reached"
    if client == "anthropic":
        assert error_obj["type"] == "rate_limit_error"


def test_rate_limit_through_sdks(stack, upstream, unique_model):
    model = unique_model("an")
    error = {"type": "rate_limit_error", "message": "slow down"}
    body = orjson.dumps({"type": "error", "error": error})
    upstream.script(model, Script(status=429, body=body, headers={"retry-after": "7"}))
    with pytest.raises(openai.RateLimitError) as oa_info:
        openai_client(stack).chat.completions.create(model=model, messages=USER)
    assert oa_info.value.response.headers["retry-after"] == "7"
    with pytest.raises(anthropic.RateLimitError) as an_info:
        anthropic_client(stack).messages.create(model=model, max_tokens=10, messages=USER)
    assert an_info.value.response.headers["retry-after"] == "7"


def test_sdk_exception_classes_for_upstream_statuses(stack, upstream, unique_model):
    # Cross-format: the client SDK picks its class from the status the gateway kept.
    cases = [
        ("openai", 401, anthropic.AuthenticationError),
        ("openai", 404, anthropic.NotFoundError),
        ("openai", 400, anthropic.BadRequestError),
    ]
    for wire, status, exc in cases:
        model = unique_model(PREFIX[wire])
        upstream.script(model, Script(status=status, body=upstream_error(wire, status)[0]))
        with pytest.raises(exc):
            anthropic_client(stack).messages.create(model=model, max_tokens=10, messages=USER)
    for wire, status, exc in [
        ("anthropic", 401, openai.AuthenticationError),
        ("anthropic", 404, openai.NotFoundError),
        ("anthropic", 400, openai.BadRequestError),
        ("anthropic", 529, openai.InternalServerError),
    ]:
        model = unique_model(PREFIX[wire])
        upstream.script(model, Script(status=status, body=upstream_error(wire, status)[0]))
        with pytest.raises(exc):
            openai_client(stack).chat.completions.create(model=model, messages=USER)


def test_overloaded_anthropic_client_gets_529_overloaded(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, Script(status=529, body=upstream_error("anthropic", 529)[0]))
    with pytest.raises(anthropic.APIStatusError) as info:
        anthropic_client(stack).messages.create(model=model, max_tokens=10, messages=USER)
    assert info.value.status_code == 529
    assert info.value.body["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_upstream_error_without_json_body(stack, upstream, unique_model, client, wire):
    # A proxy in front of the provider answered with HTML.
    model = unique_model(PREFIX[wire])
    upstream.script(model, Script(status=403, body=b"<html><body>Forbidden</body></html>"))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, False))
    error = assert_client_error(client, reply, 403)
    assert b"<html>" not in reply.body
    if client == "anthropic":
        assert error["type"] == "permission_error"


# --- unreachable, timeout, unreadable -----------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client", CLIENTS)
def test_unreachable_upstream_is_502(stack, unique_model, client, stream):
    model = unique_model("dead")
    reply = post(stack.urls["withhold"], client, payload_for(client, model, stream))
    assert_client_error(client, reply, 502)
    assert "sk-dead" not in reply.body.decode()


@pytest.mark.parametrize("client", CLIENTS)
def test_unreachable_message_names_the_host_and_cause_not_the_url(stack, unique_model, client):
    # providers/http.py: the provider, the upstream's host:port and the cause; never the rest of
    # the URL (its path here), a header or a key.
    reply = post(stack.urls["withhold"], client, payload_for(client, unique_model("dead"), False))
    error = assert_client_error(client, reply, 502)
    assert re.fullmatch(
        r"cannot connect to upstream 'dead' at 127\.0\.0\.1:\d+: connection refused",
        error["message"],
    ), error["message"]
    assert "/v1" not in reply.body.decode()
    assert "sk-dead" not in reply.body.decode()


def stalled_script(kind: str, wire: str, model: str, stream: bool) -> Script:
    if kind == "head":  # no status line within the timeout
        return script_for(wire, Answer(text="too late"), model, stream, stall=2)
    # mid: the head arrives at once, then the upstream goes quiet beyond the 0.5 s timeout.
    chunks, head = text_frames(wire, model, Answer(text=TEXT))
    return Script(chunks=[b"".join(chunks[:head]), b"".join(chunks[head:])], delay=2)


@pytest.fixture(scope="module")
def stalled(stack) -> dict[tuple[str, str, str, bool], Reply]:
    """Every stalled-upstream exchange, run concurrently once: each waits out the timeout."""
    jobs = [("head", c, w, s) for c, w in PAIRS for s in (False, True)]
    jobs += [("mid", c, w, True) for c, w in PAIRS]
    payloads = {}
    for kind, client, wire, stream in jobs:
        model = f"{SLOW_PREFIX[wire]}-{uuid.uuid4().hex[:10]}"
        stack.upstream.script(model, stalled_script(kind, wire, model, stream))
        payloads[(kind, client, wire, stream)] = (client, payload_for(client, model, stream))
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {
            key: pool.submit(post, stack.urls["withhold"], client, payload)
            for key, (client, payload) in payloads.items()
        }
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_stalled_upstream_is_504(stalled, client, wire, stream):
    reply = stalled[("head", client, wire, stream)]
    error = assert_client_error(client, reply, 504)
    if client == "anthropic":
        assert error["type"] == "timeout_error"


def test_sdks_raise_on_unreachable_and_timeout(stack, upstream, unique_model):
    with pytest.raises(openai.InternalServerError) as oa_info:
        openai_client(stack).chat.completions.create(model=unique_model("dead"), messages=USER)
    assert oa_info.value.status_code == 502
    model = unique_model("slow-an")
    upstream.script(model, script_for("anthropic", Answer(text="x"), model, False, stall=2))
    with pytest.raises(anthropic.APIStatusError) as an_info:
        anthropic_client(stack).messages.create(model=model, max_tokens=10, messages=USER)
    assert an_info.value.status_code == 504


@pytest.mark.parametrize(
    "body", [b"this is not json", b"[1, 2]", b"{}", b'{"choices": "x"}', b'{"content": 5}', b""]
)
@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_unreadable_upstream_body_is_502(stack, upstream, unique_model, client, wire, body):
    model = unique_model(PREFIX[wire])
    upstream.script(model, Script(status=200, body=body))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, False))
    assert_client_error(client, reply, 502)


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_stream_request_answered_with_non_sse_body(stack, upstream, unique_model, client, wire):
    # The upstream ignored `stream: true`; nothing reached the client: a real status.
    model = unique_model(PREFIX[wire])
    upstream.script(model, Script(status=200, body=b"not an event stream"))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert_client_error(client, reply, 502)


# --- failures before the first byte of a stream -------------------------------------------------


@pytest.mark.parametrize(
    ("error_type", "anthropic_status"), [("overloaded_error", 529), ("api_error", None)]
)
@pytest.mark.parametrize("client", CLIENTS)
def test_anthropic_stream_starting_with_error_event(
    stack, upstream, unique_model, client, error_type, anthropic_status
):
    model = unique_model("an")
    event = {"type": "error", "error": {"type": error_type, "message": "Overloaded"}}
    upstream.script(model, Script(chunks=anthropic_sse([event])))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert reply.status >= 500, reply.body
    if client == "anthropic" and anthropic_status is not None:
        assert reply.status == anthropic_status
    error = assert_client_error(client, reply, reply.status)
    assert error["message"] == "Overloaded"
    if client == "anthropic":
        assert error["type"] == error_type


@pytest.mark.parametrize("client", CLIENTS)
def test_anthropic_stream_starting_with_rate_limit_event(stack, upstream, unique_model, client):
    model = unique_model("an")
    event = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    upstream.script(model, Script(chunks=anthropic_sse([event])))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert_client_error(client, reply, 429)


@pytest.mark.parametrize("client", CLIENTS)
def test_openai_stream_starting_with_error_frame(stack, upstream, unique_model, client):
    model = unique_model("oa")
    error = {"message": "The server had an error", "type": "server_error", "code": None}
    upstream.script(model, Script(chunks=openai_sse([{"error": error}], done=False)))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert 500 <= reply.status < 600, reply.body
    error_obj = assert_client_error(client, reply, reply.status)
    assert error_obj["message"] == "The server had an error"


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_empty_stream_is_a_real_status(stack, upstream, unique_model, client, wire):
    model = unique_model(PREFIX[wire])
    upstream.script(model, Script(chunks=[]))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert_client_error(client, reply, 502)


# --- failures after the first byte: in-stream error events --------------------------------------

TEXT = "Hello world, this is a longer text"


def text_frames(wire: str, model: str, answer: Answer) -> tuple[list[bytes], int]:
    """The upstream's frames, and how many lead up to the first three text pieces (15 chars)."""
    if wire == "openai":
        return openai_sse(openai_chunks(answer, model)), 1 + 3
    return anthropic_sse(anthropic_events(answer, model)), 3 + 3


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_stream_dropped_mid_way_ends_with_error_event(stack, upstream, unique_model, client, wire):
    model = unique_model(PREFIX[wire])
    chunks, head = text_frames(wire, model, Answer(text=TEXT))
    upstream.script(model, Script(chunks=chunks, drop_after=head, delay=0.01))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert streamed_text(client, reply) == TEXT[:15]
    obj = final_error_event(client, reply)
    assert_gateway_ext(obj, PROVIDER[wire])


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_stream_dropped_mid_tool_call_withholds_it(stack, upstream, unique_model, client, wire):
    model = unique_model(PREFIX[wire])
    tool_id = "call_abc" if wire == "openai" else "toolu_abc"
    answer = Answer(text="Looking.", tools=[Tool(tool_id, "get_weather", '{"city": "Paris"}')])
    chunks, _ = text_frames(wire, model, answer)
    upstream.script(model, Script(chunks=chunks, drop_after=len(chunks) - 5, delay=0.01))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert streamed_text(client, reply) == "Looking."
    assert streamed_tool_calls(client, reply) == []
    obj = final_error_event(client, reply)
    ext = assert_gateway_ext(obj, PROVIDER[wire])
    assert ext["withheld_tool_calls"] == [{"id": tool_id, "name": "get_weather"}]


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_upstream_error_event_mid_stream(stack, upstream, unique_model, client, wire):
    model = unique_model(PREFIX[wire])
    upstream.script(model, script_for(wire, Answer(text=TEXT, error_mid=True), model, True))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert streamed_text(client, reply) == TEXT
    obj = final_error_event(client, reply)
    assert_gateway_ext(obj, PROVIDER[wire])
    if client == "anthropic" and wire == "anthropic":
        assert obj["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_stream_without_terminator_ends_with_error_event(
    stack, upstream, unique_model, client, wire
):
    model = unique_model(PREFIX[wire])
    upstream.script(model, script_for(wire, Answer(text=TEXT, terminator=False), model, True))
    reply = post(stack.urls["withhold"], client, payload_for(client, model, True))
    assert streamed_text(client, reply) == TEXT
    obj = final_error_event(client, reply)
    assert_gateway_ext(obj, PROVIDER[wire])


@pytest.mark.parametrize(("client", "wire"), PAIRS)
def test_stream_stalled_mid_way_ends_with_error_event(stalled, client, wire):
    reply = stalled[("mid", client, wire, True)]
    assert streamed_text(client, reply) == TEXT[:15]
    obj = final_error_event(client, reply)
    ext = assert_gateway_ext(obj, "slow" if wire == "openai" else "slow_anthropic")
    assert ext.get("cut_reason") == "upstream_timeout"


def test_sdks_raise_on_stream_dropped_mid_way(stack, upstream, unique_model):
    model = unique_model("oa")
    chunks, head = text_frames("openai", model, Answer(text=TEXT))
    upstream.script(model, Script(chunks=chunks, drop_after=head, delay=0.01))
    received = []
    stream = openai_client(stack).chat.completions.create(model=model, messages=USER, stream=True)
    with pytest.raises(openai.APIError):
        for chunk in stream:
            if chunk.choices:
                received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == TEXT[:15]

    model = unique_model("an")
    chunks, head = text_frames("anthropic", model, Answer(text=TEXT))
    upstream.script(model, Script(chunks=chunks, drop_after=head, delay=0.01))
    texts = []
    client = anthropic_client(stack)
    with (
        pytest.raises(anthropic.APIError),
        client.messages.stream(model=model, max_tokens=10, messages=USER) as stream,
    ):
        for text in stream.text_stream:
            texts.append(text)
    assert "".join(texts) == TEXT[:15]
