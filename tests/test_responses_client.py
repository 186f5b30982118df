"""`POST /v1/responses` for Responses clients (Codex, the Agents SDK, the openai SDK), to an
OpenAI Chat and an Anthropic Messages upstream: the real openai SDK (`responses.create`,
`responses.stream`, `stream=True`, sync and async) and the raw bytes against the grammar."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from tests.conftest import async_openai_client, openai_client
from tests.responses_support import (
    WEATHER_TOOL,
    check_grammar,
    post,
    raw_events,
    text_deltas,
)
from tests.scenarios import Answer, Tool, script_for
from tests.upstream import Script, anthropic_sse

WIRES = ("openai", "anthropic")
PREFIX = {"openai": "oa", "anthropic": "an"}
TEXT = "Sunny in Zürich, 21 °C. 😀"
# How each wire names a tool call's id (the client's call_id is the upstream's, unchanged).
CALL_ID = {"openai": "call_up_{n}", "anthropic": "toolu_up_{n}"}


def scripted(upstream, unique_model, wire: str, answer: Answer, stream: bool) -> str:
    model = unique_model(PREFIX[wire])
    upstream.script(model, script_for(wire, answer, model, stream))
    return model


def calls(wire: str, *arguments: str) -> list[Tool]:
    return [
        Tool(CALL_ID[wire].format(n=n), "get_weather", args) for n, args in enumerate(arguments)
    ]


def create(stack, model: str, stream: bool, policy: str = "withhold", **kwargs: Any) -> Any:
    """The final Response the SDK gives, streamed through `responses.stream` or whole."""
    client = openai_client(stack, policy)
    kwargs.setdefault("input", "What is the weather in Zürich?")
    if not stream:
        return client.responses.create(model=model, **kwargs)
    terminal = None
    with client.responses.stream(model=model, **kwargs) as events:
        for event in events:
            if event.type in ("response.completed", "response.incomplete", "response.failed"):
                terminal = event.response
        if terminal is not None and terminal.status == "completed":
            return events.get_final_response()  # the helper accepts only a completed one
    return terminal


# --- text, tools, usage --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_text(stack, upstream, unique_model, wire, stream):
    model = scripted(upstream, unique_model, wire, Answer(text=TEXT), stream)

    response = create(stack, model, stream)

    assert response.status == "completed" and response.incomplete_details is None
    assert response.output_text == TEXT
    assert [item.type for item in response.output] == ["message"]
    assert response.id.startswith("resp_") and len(response.id) == 37
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (12, 34, 46)
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    ext = response.model_extra["gateway"]
    assert ext["stop_reason"] == "stop" and ext["truncated"] is False
    assert ext["native_stop_reason"] == ("stop" if wire == "openai" else "end_turn")
    sent = upstream.last(model)
    assert sent.path == ("/v1/chat/completions" if wire == "openai" else "/v1/messages")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("n", [1, 2], ids=["one-call", "parallel-calls"])
def test_function_calls(stack, upstream, unique_model, wire, stream, n):
    arguments = ['{"city": "Zürich"}', '{"city":"Paris","days":[1,2]}'][:n]
    answer = Answer(text="Checking.", tools=calls(wire, *arguments))
    model = scripted(upstream, unique_model, wire, answer, stream)

    response = create(stack, model, stream, tools=[WEATHER_TOOL])

    assert response.status == "completed"
    fcs = [item for item in response.output if item.type == "function_call"]
    assert [fc.call_id for fc in fcs] == [CALL_ID[wire].format(n=k) for k in range(n)]
    assert [json.loads(fc.arguments) for fc in fcs] == [json.loads(a) for a in arguments]
    assert all(fc.id.startswith("fc_") and fc.id != fc.call_id for fc in fcs)
    assert all(fc.name == "get_weather" and fc.status == "completed" for fc in fcs)
    assert response.output_text == "Checking."
    assert response.model_extra["gateway"]["stop_reason"] == "tool_calls"
    tools = upstream.last(model).json["tools"]
    names = [t["function"]["name"] if wire == "openai" else t["name"] for t in tools]
    assert names == ["get_weather"]


@pytest.mark.parametrize("wire", WIRES)
def test_stream_true_sync_and_async_give_the_same_events(stack, upstream, unique_model, wire):
    answer = Answer(text=TEXT, tools=calls(wire, '{"city": "Bern"}'))
    model = scripted(upstream, unique_model, wire, answer, True)
    kwargs = {"model": model, "input": "hi", "tools": [WEATHER_TOOL], "stream": True}

    sync_kinds = [event.type for event in openai_client(stack).responses.create(**kwargs)]

    async def read() -> list[str]:
        async with async_openai_client(stack) as client:  # closed on this loop, not at collection
            return [event.type async for event in await client.responses.create(**kwargs)]

    async_kinds = asyncio.run(read())
    assert sync_kinds == async_kinds
    assert sync_kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in sync_kinds


def test_async_create(stack, upstream, unique_model):
    model = scripted(upstream, unique_model, "anthropic", Answer(text=TEXT), False)

    async def call() -> Any:
        async with async_openai_client(stack) as client:
            return await client.responses.create(model=model, input="hi")

    assert asyncio.run(call()).output_text == TEXT


# --- the second turn: history items reach the upstream well formed ------------------------------


def second_turn_input(wire: str) -> list[dict[str, Any]]:
    call_id = CALL_ID[wire].format(n=0)
    return [
        {"role": "user", "content": "Weather in Bern and Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "On it."}],
        },
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": '{"city":"Bern"}',
        },
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": call_id, "output": "Rain"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "Sun"}],
        },
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_second_turn_to_openai(stack, upstream, unique_model):
    model = scripted(upstream, unique_model, "openai", Answer(text="Done."), False)

    response = create(
        stack, model, False, input=second_turn_input("openai"), instructions="Be brief."
    )

    assert response.output_text == "Done."
    messages = upstream.last(model).json["messages"]
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Bern and Paris?"},
        {
            "role": "assistant",
            "content": "On it.",
            "tool_calls": [
                {
                    "id": "call_up_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Bern"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_up_0", "content": "Rain"},
        {"role": "tool", "tool_call_id": "c2", "content": "Sun"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    assert response.model_extra["gateway"]["dropped"]["input_items"] == {"reasoning": 1}


def test_second_turn_to_anthropic_keeps_its_turn_order(stack, upstream, unique_model):
    model = scripted(upstream, unique_model, "anthropic", Answer(text="Done."), False)

    create(stack, model, False, input=second_turn_input("anthropic"), instructions="Be brief.")

    sent = upstream.last(model).json
    assert sent["system"] == "Be brief."
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assistant, results = sent["messages"][1]["content"], sent["messages"][2]["content"]
    assert [b["type"] for b in assistant] == ["text", "tool_use", "tool_use"]
    assert [(b["id"], b["input"]) for b in assistant[1:]] == [
        ("toolu_up_0", {"city": "Bern"}),
        ("c2", {"city": "Paris"}),
    ]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert [b.get("tool_use_id") for b in results[:2]] == ["toolu_up_0", "c2"]
    assert results[2]["text"] == "And tomorrow?"


# --- stop reasons: status and incomplete_details, native kept -----------------------------------

ROWS = [
    # wire, native, status, incomplete reason, normalized
    ("openai", "stop", "completed", None, "stop"),
    ("openai", "length", "incomplete", "max_output_tokens", "length"),
    ("openai", "content_filter", "incomplete", "content_filter", "content_filter"),
    ("openai", "model_length", "incomplete", "max_output_tokens", "context_window"),
    ("openai", "some_future_reason", "completed", None, "unknown"),
    ("anthropic", "end_turn", "completed", None, "stop"),
    ("anthropic", "max_tokens", "incomplete", "max_output_tokens", "length"),
    ("anthropic", "stop_sequence", "completed", None, "stop_sequence"),
    ("anthropic", "refusal", "incomplete", "content_filter", "refusal"),
    ("anthropic", "pause_turn", "completed", None, "pause"),
    (
        "anthropic",
        "model_context_window_exceeded",
        "incomplete",
        "max_output_tokens",
        "context_window",
    ),
    ("anthropic", "some_future_reason", "completed", None, "unknown"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("wire", "native", "status", "reason", "normalized"),
    ROWS,
    ids=[f"{r[0]}-{r[1]}" for r in ROWS],
)
def test_stop_reason_rows(
    stack, upstream, unique_model, stream, wire, native, status, reason, normalized
):
    stop_sequence = "STOP" if native == "stop_sequence" else None
    answer = Answer(text="Partial", native_stop=native, stop_sequence=stop_sequence)
    model = scripted(upstream, unique_model, wire, answer, stream)

    response = create(stack, model, stream)

    assert response.status == status
    assert (response.incomplete_details.reason if response.incomplete_details else None) == reason
    message = response.output[0]
    assert message.status == ("completed" if status == "completed" else "incomplete")
    ext = response.model_extra["gateway"]
    assert (ext["stop_reason"], ext["native_stop_reason"]) == (normalized, native)
    assert ext["truncated"] is (normalized in ("length", "context_window"))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_unknown_stop_delivers_the_calls(stack, upstream, unique_model, wire, stream):
    answer = Answer(tools=calls(wire, '{"city": "Oslo"}'), native_stop="some_future_reason")
    model = scripted(upstream, unique_model, wire, answer, stream)

    response = create(stack, model, stream, tools=[WEATHER_TOOL])

    assert response.status == "completed"
    assert [item.type for item in response.output] == ["function_call"]


# --- a cut response's calls ---------------------------------------------------------------------

CUT_ARGS = '{"city": "Zür'


@pytest.mark.parametrize("wire", WIRES)
def test_a_cut_call_is_withheld_and_never_in_the_bytes(stack, upstream, unique_model, wire):
    native = "length" if wire == "openai" else "max_tokens"
    answer = Answer(text="Let me check", tools=calls(wire, CUT_ARGS), native_stop=native)
    model = scripted(upstream, unique_model, wire, answer, True)

    text, events = raw_events(stack, {"model": model, "input": "hi", "tools": [WEATHER_TOOL]})

    final = check_grammar(events)
    assert events[-1][0] == "response.incomplete"
    assert "Zür" not in text.replace("Zürich", "") and "function_call" not in text
    assert [item["type"] for item in final["output"]] == ["message"]
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    withheld = final["gateway"]["withheld_tool_calls"]
    assert withheld == [{"id": CALL_ID[wire].format(n=0), "name": "get_weather"}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_cut_call_under_pass_is_delivered_incomplete(stack, upstream, unique_model, wire, stream):
    native = "length" if wire == "openai" else "max_tokens"
    answer = Answer(text="Let me check", tools=calls(wire, CUT_ARGS), native_stop=native)
    model = scripted(upstream, unique_model, wire, answer, stream)

    response = create(stack, model, stream, policy="pass", tools=[WEATHER_TOOL])

    assert response.status == "incomplete"
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert call.status == "incomplete" and call.call_id == CALL_ID[wire].format(n=0)
    if wire == "openai":
        assert call.arguments == CUT_ARGS
    ext = response.model_extra["gateway"]
    assert ext["truncated"] is True and ext["withheld_tool_calls"] == []


# --- the grammar on the raw bytes ---------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
def test_the_stream_grammar(stack, upstream, unique_model, wire):
    answer = Answer(text=TEXT, tools=calls(wire, '{"city": "Bern"}', '{"city": "Rome"}'))
    model = scripted(upstream, unique_model, wire, answer, True)

    text, events = raw_events(stack, {"model": model, "input": "hi", "tools": [WEATHER_TOOL]})

    final = check_grammar(events)
    assert "[DONE]" not in text
    assert text_deltas(events) == TEXT
    kinds = [kind for kind, _ in events]
    message = [
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * kinds.count("response.output_text.delta"),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    call = [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    expected = ["response.created", "response.in_progress", *message, *call, *call]
    assert kinds == [*expected, "response.completed"]
    assert [item["type"] for item in final["output"]] == [
        "message",
        "function_call",
        "function_call",
    ]
    assert final["status"] == "completed" and final["usage"]["total_tokens"] == 46


# --- broken streams and upstream errors ---------------------------------------------------------


@pytest.mark.parametrize("how", ["no-terminator", "error-event"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_broken_stream_ends_with_error_then_failed(stack, upstream, unique_model, wire, how):
    answer = Answer(
        text="Partial answer",
        tools=calls(wire, '{"city": "Bern"}'),
        terminator=how != "no-terminator",
        error_mid=how == "error-event",
    )
    model = scripted(upstream, unique_model, wire, answer, True)

    _, events = raw_events(stack, {"model": model, "input": "hi", "tools": [WEATHER_TOOL]})

    final = check_grammar(events)
    assert [k for k, _ in events][-2:] == ["error", "response.failed"]
    assert final["status"] == "failed" and final["error"]["code"] == "server_error"
    assert final["output"][0]["status"] == "incomplete"
    assert final["gateway"]["truncated"] is True
    assert [item["type"] for item in final["output"]] == ["message"]  # the call withheld

    with pytest.raises(openai.APIError):
        create(stack, model, True, tools=[WEATHER_TOOL])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("wire", "status", "body"),
    [
        ("openai", 429, {"error": {"message": "slow down", "type": "rate_limit_error"}}),
        (
            "anthropic",
            429,
            {"type": "error", "error": {"type": "rate_limit_error", "message": "x"}},
        ),
        (
            "anthropic",
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "x"}},
        ),
        ("openai", 400, {"error": {"message": "bad", "type": "invalid_request_error"}}),
    ],
)
def test_upstream_errors_keep_their_status(
    stack, upstream, unique_model, wire, status, body, stream
):
    model = unique_model(PREFIX[wire])
    headers = {"retry-after": "7"}
    upstream.script(model, Script(status=status, body=json.dumps(body).encode(), headers=headers))

    got, response_headers, text = post(stack, {"model": model, "input": "hi", "stream": stream})

    assert got == (503 if status == 529 else status)
    error = json.loads(text)["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    if status == 429:
        assert response_headers.get("retry-after") == "7"
        assert error["type"] == "rate_limit_error"
    if wire == "anthropic" and status == 429:
        assert error["code"] == "rate_limit_exceeded"  # the code Codex retries on


# --- bad input ----------------------------------------------------------------------------------

BAD = [
    ({"input": "hi"}, "model"),
    ({"model": "oa-x", "input": 7}, "input"),
    ({"model": "oa-x"}, "input"),
    (
        {"model": "oa-x", "input": [{"type": "function_call_output", "output": "x"}]},
        "input[0].call_id",
    ),
    (
        {"model": "oa-x", "input": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]},
        "input[0].name",
    ),
    ({"model": "oa-x", "input": "hi", "background": True}, "background"),
    (
        {
            "model": "oa-x",
            "input": "hi",
            "tools": [{"type": "web_search"}],
            "tool_choice": {"type": "web_search"},
        },
        "tool_choice",
    ),
    (
        {
            "model": "oa-x",
            "input": "hi",
            "tools": [{"type": "web_search"}],
            "tool_choice": "required",
        },
        "tool_choice",
    ),
    (
        {
            "model": "an-x",
            "input": [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{not json"}
            ],
        },
        "input[0].arguments",
    ),
]


@pytest.mark.parametrize(("body", "param"), BAD, ids=[b[1] for b in BAD])
def test_bad_input_is_a_400_naming_the_field(stack, body, param):
    status, headers, text = post(stack, body)

    assert status == 400, text
    error = json.loads(text)["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert "not json" not in text  # the value is never echoed
    assert headers.get("x-request-id")


def deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


# A stream event holds a repeated field three containers deep ({"response": {"metadata": ...}}),
# and orjson writes at most 254: a list 251 deep inside one is the most an answer can repeat.
DEEPEST = 251


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("field", "value", "status"),
    [
        ("text", {"format": {"type": "text", "extra": deep_list(DEEPEST)}}, 400),
        ("metadata", {"k": deep_list(DEEPEST + 1)}, 400),
        ("metadata", {"k": deep_list(DEEPEST)}, 200),
    ],
    ids=["text", "metadata", "metadata-at-the-limit"],
)
def test_a_repeated_field_too_deep_to_encode_again_is_a_400(
    stack, upstream, unique_model, wire, stream, field, value, status
):
    """The answer repeats `text`, `metadata`, `tools`... inside itself: a value the translation
    left out, nested just below what the request parser takes, would pass on the way up and
    fail the answer with a 500; it is refused first, naming the field, and nothing is sent."""
    model = scripted(upstream, unique_model, wire, Answer(text="fine"), stream)
    body = {"model": model, "input": "hi", field: value, "stream": stream}

    got, headers, text = post(stack, body)

    assert got == status, text[:300]
    assert headers.get("x-request-id")
    if status == 200:
        return
    error = json.loads(text)["error"]
    assert error["type"] == "invalid_request_error" and error["param"].startswith(field), error
    assert upstream.received[model] == []


def test_an_invalid_json_body_is_a_400(stack):
    status, _, text = post(stack, {"model": "oa-x"} | {"input": "hi"}, path="/responses")
    assert status != 404
    url_status, _, text = post(stack, {}, path="/v1/responses")
    assert url_status == 400 and json.loads(text)["error"]["param"] == "model"


def test_previous_response_id_without_a_store_is_not_found(stack, upstream, unique_model):
    model = scripted(upstream, unique_model, "openai", Answer(text="unused"), False)

    status, _, text = post(stack, {"model": model, "input": "hi", "previous_response_id": "resp_x"})

    assert status == 400
    error = json.loads(text)["error"]
    assert (error["code"], error["param"]) == (
        "previous_response_not_found",
        "previous_response_id",
    )
    assert upstream.received[model] == []


def test_an_unknown_model_is_model_not_found(stack):
    status, _, text = post(stack, {"model": "nobody-routes-this", "input": "hi"})
    assert status == 404 and json.loads(text)["error"]["code"] == "model_not_found"


# --- tools: hosted ones dropped, custom and namespaced ones round-trip --------------------------


@pytest.mark.parametrize("wire", WIRES)
def test_hosted_tools_are_dropped_and_named(stack, upstream, unique_model, wire):
    model = scripted(upstream, unique_model, wire, Answer(text="ok"), False)
    tools = [{"type": "web_search"}, WEATHER_TOOL, {"type": "file_search", "vector_store_ids": []}]

    response = create(stack, model, False, tools=tools, extra_body={"seed": 1})

    assert response.status == "completed"
    ext = response.model_extra["gateway"]
    assert ext["dropped"]["tools"] == ["web_search", "file_search"]
    assert ext["dropped_fields"] == ["seed"]
    sent = upstream.last(model).json
    assert len(sent["tools"]) == 1 and "seed" not in sent


APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_custom_tool_round_trips_in_codex_shapes(stack, upstream, unique_model, wire, stream):
    call = Tool(CALL_ID[wire].format(n=0), "apply_patch", json.dumps({"input": PATCH}))
    model = scripted(upstream, unique_model, wire, Answer(tools=[call]), stream)

    response = create(stack, model, stream, tools=[APPLY_PATCH])

    (item,) = response.output
    assert item.type == "custom_tool_call" and item.name == "apply_patch"
    assert item.input == PATCH and item.call_id == call.id
    sent = upstream.last(model).json["tools"][0]
    schema = sent["function"]["parameters"] if wire == "openai" else sent["input_schema"]
    assert schema["required"] == ["input"] and "start: /.+/" in json.dumps(schema)

    history = [
        {"role": "user", "content": "add a.txt"},
        {"type": "custom_tool_call", "call_id": call.id, "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": call.id, "output": "Done"},
    ]
    follow = scripted(upstream, unique_model, wire, Answer(text="ok"), False)
    create(stack, follow, False, input=history, tools=[APPLY_PATCH])
    messages = upstream.last(follow).json["messages"]
    if wire == "openai":
        arguments = messages[1]["tool_calls"][0]["function"]["arguments"]
        assert json.loads(arguments) == {"input": PATCH}
    else:
        assert messages[1]["content"][0]["input"] == {"input": PATCH}


@pytest.mark.parametrize("wire", WIRES)
def test_namespaced_tools_are_joined_upstream_and_split_back(stack, upstream, unique_model, wire):
    call = Tool(CALL_ID[wire].format(n=0), "agents__spawn", '{"task": "x"}')
    model = scripted(upstream, unique_model, wire, Answer(tools=[call]), False)
    spawn = {"type": "function", "name": "spawn", "parameters": {"type": "object"}}
    namespace = {"type": "namespace", "name": "agents", "tools": [spawn]}

    response = create(stack, model, False, tools=[namespace])

    (item,) = response.output
    assert (item.name, item.model_extra.get("namespace") or item.namespace) == ("spawn", "agents")
    sent = upstream.last(model).json["tools"][0]
    assert (sent["function"]["name"] if wire == "openai" else sent["name"]) == "agents__spawn"


# --- the WebSocket probe, the record and the metrics --------------------------------------------


def test_a_websocket_upgrade_gets_426_in_the_openai_shape(stack):
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(stack.urls["withhold"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    headers = {
        "upgrade": "websocket",
        "connection": "Upgrade",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
        "openai-beta": "responses_websockets=2026-02-06",
    }
    conn.request("GET", "/v1/responses", headers=headers)
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    assert response.status == 426
    assert response.getheader("connection", "").lower() == "close"
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]
    assert response.getheader("x-request-id")


def test_get_without_an_upgrade_is_a_404(stack):
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(stack.urls["withhold"] + "/v1/responses/resp_x", timeout=5)
    assert caught.value.code == 404
    assert "error" in json.loads(caught.value.read())


def test_the_record_and_metrics_name_the_responses_format(stack, upstream, unique_model):
    import sqlite3
    import time
    import urllib.request

    model = scripted(upstream, unique_model, "anthropic", Answer(text="ok"), False)
    create(stack, model, False)

    deadline = time.monotonic() + 5
    row = None
    while row is None and time.monotonic() < deadline:
        with sqlite3.connect(stack.audit_db()) as db:
            row = db.execute(
                "SELECT client_format, provider FROM audit_records WHERE model = ?", (model,)
            ).fetchone()
        time.sleep(0.05)
    assert row == ("responses", "anthropic")
    metrics = urllib.request.urlopen(stack.urls["withhold"] + "/metrics", timeout=5).read()
    assert b'client_format="responses"' in metrics


def test_text_after_a_tool_call_is_held_so_item_order_is_kept(stack, upstream, unique_model):
    """Anthropic may write text after a tool_use block: it is held with the call and comes
    after it, in its own message item, instead of streaming into the first one."""
    model = unique_model("an")
    usage = {"input_tokens": 12, "output_tokens": 1}
    start = {
        "id": "msg_up1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    tool = {"type": "tool_use", "id": "toolu_up_0", "name": "get_weather", "input": {}}
    events = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "First."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": tool},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": '{"city": "Bern"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "text_delta", "text": "Then."}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 34}},
        {"type": "message_stop"},
    ]  # fmt: skip
    upstream.script(model, Script(chunks=anthropic_sse(events)))

    text, frames = raw_events(stack, {"model": model, "input": "hi", "tools": [WEATHER_TOOL]})

    final = check_grammar(frames)
    assert [item["type"] for item in final["output"]] == ["message", "function_call", "message"]
    texts = [item["content"][0]["text"] for item in final["output"] if item["type"] == "message"]
    assert texts == ["First.", "Then."]
    assert text.index('"delta":"Then."') > text.index("response.function_call_arguments.done")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_no_key_prompt_argument_or_reasoning_text_in_logs_or_audit(
    stack, upstream, unique_model, caplog, wire, stream
):
    import logging
    import sqlite3
    import time

    caplog.set_level(logging.DEBUG)
    prompt, argument, reasoning = "PROMPT-7f3a", "ARGUMENT-91bc", "REASONING-55de"
    cut_arguments = json.dumps({"city": argument + " and more"})[:-5]
    native = "length" if wire == "openai" else "max_tokens"
    answer = Answer(text="ok", tools=calls(wire, cut_arguments), native_stop=native)
    model = scripted(upstream, unique_model, wire, answer, stream)
    history = [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": reasoning}],
        },
        {"role": "user", "content": prompt},
    ]
    create(stack, model, stream, input=history, tools=[WEATHER_TOOL])

    deadline = time.monotonic() + 5
    rows: list[Any] = []
    while not rows and time.monotonic() < deadline:
        with sqlite3.connect(stack.audit_db()) as db:
            rows = db.execute("SELECT * FROM audit_records WHERE model = ?", (model,)).fetchall()
        time.sleep(0.05)
    assert rows
    stored = repr(rows)
    for secret in (prompt, argument, reasoning, "sk-client"):
        assert secret not in caplog.text and secret not in stored


@pytest.mark.parametrize("native", ["abort", "error"])
def test_a_whole_body_that_stopped_with_an_error_is_a_failed_response(
    stack, upstream, unique_model, native
):
    answer = Answer(text="Partial", tools=calls("openai", '{"city": "Bern"}'), native_stop=native)
    model = scripted(upstream, unique_model, "openai", answer, False)

    status, _, text = post(stack, {"model": model, "input": "hi", "tools": [WEATHER_TOOL]})

    assert status == 200, text
    body = json.loads(text)
    assert body["status"] == "failed" and body["error"]["code"] == "server_error"
    assert [item["type"] for item in body["output"]] == ["message"]  # the call withheld
    assert body["output"][0]["status"] == "incomplete"
    assert body["gateway"]["truncated"] is True
    assert body["gateway"]["stop_reason"] == ("aborted" if native == "abort" else "error")
