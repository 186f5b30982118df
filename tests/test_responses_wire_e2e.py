"""An OpenAI Responses upstream behind the gateway, for Chat Completions and Messages clients.

Real HTTP all the way: the openai and anthropic SDKs talk to a gateway built with `build_app`,
whose provider of kind `openai_responses` talks to a loopback upstream speaking the Responses
wire (tests/responses_upstream.py). Every case runs streamed and not, for both client formats:
text, one and two tool calls, the next turn's tool results, every stop row, cut calls withheld
and passed, broken streams, failed responses and upstream error statuses.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.responses_upstream import (
    RESPONSES_KEY,
    ResponsesStack,
    call_item,
    failed_events,
    reasoning_item,
    refusal_item,
    response,
    responses_sse,
    stream_events,
    text_item,
)
from tests.test_matrix_support import (
    Seen,
    _anthropic_sync,
    _openai_sync,
    check_error_ending,
    raw_stream,
)
from tests.upstream import Script

CLIENTS = ("openai", "anthropic")
MODES = [
    pytest.param(client, stream, id=f"{client}-{'stream' if stream else 'whole'}")
    for client in CLIENTS
    for stream in (False, True)
]
WEATHER = call_item("call_w1", "weather", '{"city": "Zürich", "unit": "c"}')
TIME = call_item("call_t2", "time", '{"zone": "Europe/Zurich", "list": [1, 2, {"x": null}]}')
TOOLS = ["weather", "time"]


@pytest.fixture(scope="module")
def rstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResponsesStack]:
    stack = ResponsesStack(Path(tmp_path_factory.mktemp("responses-audit")))
    stack.start()
    yield stack
    stack.stop()


def model_name() -> str:
    return f"rs-{uuid.uuid4().hex[:10]}"


def script_of(items: list[dict[str, Any]], stream: bool, **terminal: Any) -> Script:
    if stream:
        return Script(chunks=responses_sse(stream_events(items, **terminal)))
    status = terminal.get("status", "completed")
    return Script(body=orjson.dumps(response(items, status, terminal.get("reason"))))


def kwargs_for(client: str, model: str, tools: list[str], messages: Any = None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages or [{"role": "user", "content": "Weather in Zürich?"}],
    }
    schema = {"type": "object", "properties": {}}
    if client == "openai":
        if tools:
            kwargs["tools"] = [
                {"type": "function", "function": {"name": name, "parameters": schema}}
                for name in tools
            ]
    else:
        kwargs["max_tokens"] = 256
        if tools:
            kwargs["tools"] = [{"name": name, "input_schema": schema} for name in tools]
    return kwargs


def drive(
    rstack: ResponsesStack,
    client: str,
    stream: bool,
    script: Script | None = None,
    *,
    items: list[dict[str, Any]] | None = None,
    policy: str = "withhold",
    tools: list[str] | None = None,
    messages: Any = None,
    **terminal: Any,
) -> Seen:
    model = model_name()
    rstack.upstream.script(model, script or script_of(items or [], stream, **terminal))
    kwargs = kwargs_for(client, model, TOOLS if tools is None else tools, messages)
    seen = Seen(model)
    if client == "openai":
        _openai_sync(rstack.openai(policy), seen, kwargs, stream)
    else:
        _anthropic_sync(rstack.anthropic(policy), seen, kwargs, stream)
    got = rstack.upstream.received.get(model) or []
    seen.received = got[-1] if got else None
    return seen


def check_gateway(seen: Seen, stop: str, native: str, truncated: bool, withheld: Any = ()) -> None:
    ext = seen.gateway
    assert isinstance(ext, dict), seen.stream_kinds
    assert ext["stop_reason"] == stop
    assert ext["native_stop_reason"] == native
    assert ext["provider"] == "responses"
    assert ext["truncated"] is truncated
    assert ext["withheld_tool_calls"] == list(withheld)


def check_calls(seen: Seen, calls: list[dict[str, Any]]) -> None:
    """Ids are the upstream's call_ids, and arguments equal the upstream's after parsing."""
    assert [(t.id, t.name) for t in seen.tools] == [(c["call_id"], c["name"]) for c in calls]
    for got, want in zip(seen.tools, calls, strict=True):
        assert got.args == json.loads(want["arguments"])


# --- what the upstream receives -------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_the_upstream_gets_a_responses_body_at_its_path_with_the_providers_key(
    rstack, client, stream
):
    seen = drive(rstack, client, stream, items=[text_item("Sunny.")])
    got = seen.received
    assert got is not None
    assert got.path == "/v1/responses"
    assert got.headers["Authorization"] == f"Bearer {RESPONSES_KEY}"
    body = got.json
    assert body["model"] == seen.model
    assert body["store"] is False
    assert bool(body.get("stream")) is stream
    assert body["input"][-1] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Weather in Zürich?"}],
    }
    assert [t["name"] for t in body["tools"]] == TOOLS
    assert all(t["type"] == "function" and t["strict"] is False for t in body["tools"])


# --- text and tool calls ----------------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_text(rstack, client, stream):
    text = "Sunny, 21 °C — ünïcödé 😀."
    seen = drive(rstack, client, stream, items=[reasoning_item("Think."), text_item(text)])
    assert seen.error is None
    assert seen.text == text
    assert seen.tools == []
    assert seen.stop == ("stop" if client == "openai" else "end_turn")
    check_gateway(seen, "stop", "completed", truncated=False)
    if client == "openai":
        assert seen.native == "completed"


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_one_tool_call(rstack, client, stream):
    seen = drive(rstack, client, stream, items=[WEATHER])
    assert seen.error is None
    check_calls(seen, [WEATHER])
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    check_gateway(seen, "tool_calls", "completed", truncated=False)


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_two_parallel_tool_calls_after_text(rstack, client, stream):
    seen = drive(rstack, client, stream, items=[text_item("Checking."), WEATHER, TIME])
    assert seen.error is None
    assert seen.text == "Checking."
    check_calls(seen, [WEATHER, TIME])
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    check_gateway(seen, "tool_calls", "completed", truncated=False)


def test_interleaved_parallel_calls_are_told_apart_by_output_index(rstack):
    """Two calls whose argument deltas alternate: keyed by output_index, each gets its own."""
    first, second = stream_events([WEATHER]), stream_events([TIME])
    a = [e for e in first if "output_index" in e]
    b = [{**e, "output_index": 1} for e in second if "output_index" in e]
    mixed = [x for pair in zip(a, b, strict=False) for x in pair] + a[len(b) :] + b[len(a) :]
    final = {"type": "response.completed", "response": response([WEATHER, TIME])}
    script = Script(chunks=responses_sse([*first[:2], *mixed, final]))
    seen = drive(rstack, "openai", True, script)
    check_calls(seen, [WEATHER, TIME])


# --- the next turn carries the results --------------------------------------------------------


def second_turn(client: str) -> list[dict[str, Any]]:
    calls = [WEATHER, TIME]
    if client == "openai":
        return [
            {"role": "user", "content": "Weather and time in Zürich?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": c["call_id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls
                ],
            },
            *({"role": "tool", "tool_call_id": c["call_id"], "content": "ok"} for c in calls),
        ]
    return [
        {"role": "user", "content": "Weather and time in Zürich?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": c["call_id"],
                    "name": c["name"],
                    "input": json.loads(c["arguments"]),
                }
                for c in calls
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": c["call_id"], "content": "ok"} for c in calls
            ],
        },
    ]


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_the_second_turn_sends_calls_and_their_outputs_with_matching_call_ids(
    rstack, client, stream
):
    seen = drive(rstack, client, stream, items=[text_item("Done.")], messages=second_turn(client))
    assert seen.error is None and seen.text == "Done."
    assert seen.received is not None
    items = seen.received.json["input"]
    kinds = [item["type"] for item in items]
    assert kinds == [
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    calls = [i for i in items if i["type"] == "function_call"]
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert [c["call_id"] for c in calls] == ["call_w1", "call_t2"]
    assert [c["name"] for c in calls] == ["weather", "time"]
    assert [json.loads(c["arguments"]) for c in calls] == [
        json.loads(WEATHER["arguments"]),
        json.loads(TIME["arguments"]),
    ]
    assert [(o["call_id"], o["output"]) for o in outputs] == [("call_w1", "ok"), ("call_t2", "ok")]


# --- stop rows --------------------------------------------------------------------------------

# (status, reason, items, normalized, native, chat finish_reason, anthropic stop_reason, cut)
ROWS = [
    ("completed", None, [text_item("All done.")], "stop", "completed", "stop", "end_turn", False),
    (
        "incomplete",
        "max_output_tokens",
        [text_item("Partial")],
        "length",
        "incomplete:max_output_tokens",
        "length",
        "max_tokens",
        True,
    ),
    (
        "incomplete",
        "content_filter",
        [text_item("Partial")],
        "content_filter",
        "incomplete:content_filter",
        "content_filter",
        "refusal",
        False,
    ),
    (
        "incomplete",
        "weird_new_reason",
        [text_item("Partial")],
        "unknown",
        "incomplete:weird_new_reason",
        "stop",
        "end_turn",
        False,
    ),
    (
        "completed",
        None,
        [refusal_item("I can't help with that.")],
        "refusal",
        "completed",
        "content_filter",
        "refusal",
        False,
    ),
]


@pytest.mark.parametrize(("client", "stream"), MODES)
@pytest.mark.parametrize(
    ("status", "reason", "items", "stop", "native", "finish", "anthropic_stop", "cut"),
    ROWS,
    ids=[row[4] + ("-refusal" if row[3] == "refusal" else "") for row in ROWS],
)
def test_stop_rows(
    rstack, client, stream, status, reason, items, stop, native, finish, anthropic_stop, cut
):
    seen = drive(rstack, client, stream, items=items, status=status, reason=reason)
    assert seen.error is None
    assert seen.stop == (finish if client == "openai" else anthropic_stop)
    check_gateway(seen, stop, native, truncated=cut)
    if client == "openai":
        assert seen.native == native


# --- cut tool calls -------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
@pytest.mark.parametrize("policy", ["withhold", "pass"])
def test_a_call_cut_at_max_output_tokens_is_withheld_or_passed(rstack, client, stream, policy):
    cut = call_item("call_cut", "weather", '{"city": "Zür')
    seen = drive(
        rstack,
        client,
        stream,
        items=[text_item("Let me check."), cut],
        status="incomplete",
        reason="max_output_tokens",
        policy=policy,
    )
    assert seen.error is None
    assert seen.text == "Let me check."
    assert seen.stop == ("length" if client == "openai" else "max_tokens")
    withheld = [{"id": "call_cut", "name": "weather"}] if policy == "withhold" else []
    check_gateway(seen, "length", "incomplete:max_output_tokens", True, withheld)
    if policy == "withhold":
        assert seen.tools == []
    else:
        assert [(t.id, t.name) for t in seen.tools] == [("call_cut", "weather")]
        if client == "openai":
            assert seen.tools[0].raw == '{"city": "Zür'  # delivered as the upstream sent it


# --- broken streams and failed responses -----------------------------------------------------


def check_broken(rstack: ResponsesStack, seen: Seen, client: str, native: str) -> None:
    """The SDK raised after the text arrived, saw no normal finish and no tool call; the raw
    stream ends with the format's error event, whose `gateway` object names the cut."""
    error = openai.APIError if client == "openai" else anthropic.APIError
    assert isinstance(seen.error, error), seen.error
    assert seen.text == "Partial"
    assert seen.tools == []  # the call the break cut off is withheld
    if client == "openai":
        assert "finish" not in seen.stream_kinds
    else:
        assert "message_stop" not in seen.stream_kinds
    frames = raw_stream(rstack, client, seen.model)
    check_error_ending(frames, client)
    ext = frames[-1].json["gateway"]
    assert ext["stop_reason"] == "error"
    assert ext["native_stop_reason"] == native
    assert ext["truncated"] is True
    assert ext["withheld_tool_calls"] == [{"id": "call_w1", "name": "weather"}]


BROKEN = [
    ("no-terminal-event", lambda events: events[:-1], "gateway:stream_truncated"),
    ("failed", lambda events: [*events[:-1], failed_events()[1]], "server_error"),
    (
        "error-event",
        lambda events: [*events[:-1], *failed_events("rate_limit_exceeded")],
        "rate_limit_exceeded",
    ),
]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("kind", "cut", "native"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_stream_broken_before_its_terminal_event(rstack, client, kind, cut, native):
    events = cut(stream_events([text_item("Partial"), WEATHER]))
    seen = drive(rstack, client, True, Script(chunks=responses_sse(events)))
    check_broken(rstack, seen, client, native)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_dropped_connection_mid_stream_is_an_error(rstack, client):
    chunks = responses_sse(stream_events([text_item("Partial"), WEATHER]))
    seen = drive(rstack, client, True, Script(chunks=chunks, drop_after=len(chunks) - 3))
    check_broken(rstack, seen, client, "gateway:connection_lost")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_failed_whole_response_is_an_error_with_the_gateway_object(rstack, client):
    failed = {
        **response([text_item("Partial")], "failed"),
        "error": {"code": "server_error", "message": "boom"},
    }
    seen = drive(rstack, client, False, Script(body=orjson.dumps(failed)))
    error = openai.APIStatusError if client == "openai" else anthropic.APIStatusError
    assert isinstance(seen.error, error)
    assert seen.error.status_code >= 500
    ext = seen.error.response.json()["gateway"]
    assert ext["stop_reason"] == "error" and ext["truncated"] is True


@pytest.mark.parametrize(("client", "stream"), MODES)
@pytest.mark.parametrize(("status", "retry_after"), [(429, "7"), (400, None), (503, "2")])
def test_an_upstream_error_status_keeps_its_status_and_retry_after(
    rstack, client, stream, status, retry_after
):
    error = {
        "error": {"message": "nope", "type": "invalid_request_error", "code": "x", "param": None}
    }
    headers = {"retry-after": retry_after} if retry_after else {}
    seen = drive(
        rstack, client, stream, Script(status=status, body=orjson.dumps(error), headers=headers)
    )
    kind = openai.APIStatusError if client == "openai" else anthropic.APIStatusError
    assert isinstance(seen.error, kind), seen.error
    assert seen.error.status_code == status
    assert seen.error.response.headers.get("retry-after") == retry_after


# --- a Claude Code style request --------------------------------------------------------------


def test_a_claude_code_style_request_reaches_the_responses_upstream(rstack):
    """Streaming, `?beta=true`, adaptive thinking, cache_control, a long metadata.user_id,
    `role: "system"` inside messages: what the upstream gets, and the names the client is told
    were dropped. Thinking summaries come back as a thinking block."""
    model = model_name()
    items = [reasoning_item("Plan: look it up."), text_item("Sunny."), WEATHER]
    rstack.upstream.script(model, Script(chunks=responses_sse(stream_events(items))))
    user_id = "user_" + "f" * 64 + "_account__session_0000"
    client = rstack.anthropic()
    with client.messages.stream(
        model=model,
        max_tokens=32000,
        system=[
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
        ],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather?", "cache_control": {"type": "ephemeral"}}
                ],
            },
        ],
        tools=[{"name": "weather", "input_schema": {"type": "object", "properties": {}}}],
        metadata={"user_id": user_id},
        extra_body={"thinking": {"type": "adaptive"}, "context_management": {"edits": []}},
        extra_query={"beta": "true"},
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    ) as stream:
        gateway = None
        for event in stream:
            if event.type == "message_delta":
                gateway = (event.model_extra or {}).get("gateway")
        message = stream.get_final_message()
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[0].thinking == "Plan: look it up."
    assert message.stop_reason == "tool_use"
    assert message.content[2].id == "call_w1"
    body = rstack.upstream.last(model).json
    assert body["instructions"] == "You are Claude Code."
    assert body["reasoning"] == {"summary": "auto"}
    assert body["max_output_tokens"] == 32000
    assert len(body["safety_identifier"]) == 64 and user_id not in str(body)
    assert body["store"] is False
    assert gateway is not None
    assert gateway["dropped_fields"] == ["cache_control", "context_management"]
