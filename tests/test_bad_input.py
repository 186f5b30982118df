"""Malformed client input gets the calling format's own error JSON and a fitting 4xx status.

Raw HTTP (http.client) for what no SDK would send, and the real SDKs for the exception class
they raise. Never a traceback, never a non-JSON body.
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import orjson
import pytest

from tests.conftest import anthropic_client, openai_client
from tests.scenarios import Answer, script_for
from tests.upstream import Script

OA = "/v1/chat/completions"
AN = "/v1/messages"
ENDPOINTS = (OA, AN)
FORMAT = {OA: "openai", AN: "anthropic"}
USER = [{"role": "user", "content": "hi"}]


def request(
    base: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP exchange; headers come back with lower-case names."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        sent = {"content-type": "application/json", **(headers or {})}
        conn.request(method, path, body=body, headers=sent)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def post(base: str, path: str, body: bytes | Any) -> tuple[int, dict[str, str], bytes]:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"anthropic-version": "2023-06-01"} if path == AN else {}
    return request(base, "POST", path, raw, headers)


def valid_body(path: str, model: str = "mock-text") -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": USER}
    if path == AN:
        body["max_tokens"] = 64
    return body


ANY_PROVIDER = "*"


def assert_error(
    fmt: str,
    status: int,
    headers: dict[str, str],
    body: bytes,
    expected: int,
    provider: str | None = None,
) -> dict[str, Any]:
    """The format's own error JSON with `expected` status; returns the inner error object.
    `provider`: the upstream that failed, which the `gateway` member names (ANY_PROVIDER: any);
    None: the client's own error, which has no `gateway` member."""
    assert status == expected, body
    assert headers["content-type"].startswith("application/json")
    assert b"Traceback" not in body
    assert b'File "' not in body
    data = orjson.loads(body)
    ext = data.pop("gateway", None)
    if provider is None:
        assert ext is None, ext
    else:
        assert ext is not None and ext["attempts"], data
        assert provider in (ANY_PROVIDER, ext["provider"]), ext
        assert ext["request_id"] == headers["x-request-id"]
    if fmt == "openai":
        assert set(data) == {"error"}, data
        error = data["error"]
        assert {"message", "type", "code"} <= set(error)
    else:
        assert data["type"] == "error", data
        error = data["error"]
        assert {"type", "message"} <= set(error)
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    return error


# --- raw HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ENDPOINTS)
def test_invalid_json(stack, path):
    status, headers, body = post(stack.urls["withhold"], path, b'{"model": "mock-text",')
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert error["type"] == "invalid_request_error"
    if path == OA:
        assert error["code"] == "invalid_json"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_empty_body(stack, path):
    status, headers, body = post(stack.urls["withhold"], path, b"")
    assert_error(FORMAT[path], status, headers, body, 400)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_json_array_body(stack, path):
    status, headers, body = post(stack.urls["withhold"], path, [valid_body(path)])
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("scalar", [b"null", b'"text"', b"42"])
def test_json_scalar_body(stack, path, scalar):
    status, headers, body = post(stack.urls["withhold"], path, scalar)
    assert_error(FORMAT[path], status, headers, body, 400)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_missing_model(stack, path):
    payload = valid_body(path)
    del payload["model"]
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "model" in error["message"]
    if path == OA:
        assert error["param"] == "model"


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("model", ["", 42, None, ["mock-text"]])
def test_empty_or_non_string_model(stack, path, model):
    status, headers, body = post(stack.urls["withhold"], path, valid_body(path, model))
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "model" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("stream", [False, True])
def test_unknown_model(stack, path, stream):
    payload = {**valid_body(path, "no-such-model-anywhere"), "stream": stream}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 404)
    assert "no-such-model-anywhere" in error["message"]
    if path == OA:
        assert error["code"] == "model_not_found"
    else:
        assert error["type"] == "not_found_error"


def test_anthropic_body_without_max_tokens(stack):
    # An OpenAI-shaped body sent to the Anthropic endpoint.
    payload = {"model": "mock-text", "messages": USER}
    status, headers, body = post(stack.urls["withhold"], AN, payload)
    error = assert_error("anthropic", status, headers, body, 400)
    assert error["type"] == "invalid_request_error"
    assert "max_tokens" in error["message"]


@pytest.mark.parametrize("max_tokens", [0, -5, "many", 1.5, None])
def test_anthropic_bad_max_tokens(stack, max_tokens):
    payload = {**valid_body(AN), "max_tokens": max_tokens}
    status, headers, body = post(stack.urls["withhold"], AN, payload)
    error = assert_error("anthropic", status, headers, body, 400)
    assert "max_tokens" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("messages", ["hi", {"role": "user", "content": "hi"}, None, ["hi"]])
def test_messages_not_a_list_of_objects(stack, path, messages):
    payload = {**valid_body(path), "messages": messages}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "messages" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_missing_messages(stack, path):
    payload = valid_body(path)
    del payload["messages"]
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "messages" in error["message"]


def test_openai_empty_messages(stack):
    payload = {"model": "mock-text", "messages": []}
    status, headers, body = post(stack.urls["withhold"], OA, payload)
    error = assert_error("openai", status, headers, body, 400)
    assert error["param"] == "messages"


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("stream", ["yes", 1, "true"])
def test_stream_not_a_boolean(stack, path, stream):
    payload = {**valid_body(path), "stream": stream}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert "stream" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_bad_input_is_rejected_before_any_upstream_call(stack, upstream, unique_model, path):
    # A routable model with a broken body: the upstream never sees it.
    model = unique_model("oa" if path == OA else "an")
    upstream.script(model, Script(body=b"{}"))
    payload = {**valid_body(path, model), "stream": "yes"}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    assert_error(FORMAT[path], status, headers, body, 400)
    assert upstream.received[model] == []


@pytest.mark.parametrize(
    ("method", "path", "headers", "fmt"),
    [
        ("GET", "/v1/nothing-here", {}, "openai"),
        ("POST", "/v1/completions", {}, "openai"),
        ("POST", "/v2/messages", {"anthropic-version": "2023-06-01"}, "anthropic"),
        ("GET", "/v1/messages/batches", {"anthropic-version": "2023-06-01"}, "anthropic"),
    ],
)
def test_unknown_path(stack, method, path, headers, fmt):
    body = b"{}" if method == "POST" else None
    status, resp_headers, data = request(stack.urls["withhold"], method, path, body, headers)
    error = assert_error(fmt, status, resp_headers, data, 404)
    assert path in error["message"]
    if fmt == "anthropic":
        assert error["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("method", "path", "headers", "fmt"),
    [
        ("GET", "/v1/nothing-here", {}, "openai"),
        ("POST", "/v2/messages", {"anthropic-version": "2023-06-01"}, "anthropic"),
        ("POST", OA, {}, "openai"),  # refused by the exchange: invalid JSON
        ("POST", AN, {"anthropic-version": "2023-06-01"}, "anthropic"),
    ],
)
def test_every_refusal_has_a_fresh_request_id(stack, method, path, headers, fmt):
    ids = set()
    for _ in range(2):
        body = b"{" if method == "POST" else None
        _, resp_headers, data = request(stack.urls["withhold"], method, path, body, headers)
        request_id = resp_headers.get("x-request-id", "")
        assert len(request_id) >= 16, resp_headers
        if fmt == "anthropic":
            assert orjson.loads(data)["request_id"] == request_id
        ids.add(request_id)
    assert len(ids) == 2


@pytest.mark.parametrize("path", ENDPOINTS)
def test_wrong_method_on_an_endpoint(stack, path):
    headers = {"anthropic-version": "2023-06-01"} if path == AN else {}
    status, resp_headers, data = request(stack.urls["withhold"], "GET", path, None, headers)
    assert 400 <= status < 500
    assert resp_headers["content-type"].startswith("application/json")
    assert b"Traceback" not in data
    parsed = orjson.loads(data)
    if path == OA:
        assert set(parsed) == {"error"}
    else:
        assert parsed["type"] == "error"


# --- the real SDKs ------------------------------------------------------------------------------


def test_openai_sdk_unknown_model_raises_not_found(stack):
    client = openai_client(stack)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model", messages=USER)
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"


def test_openai_sdk_unknown_model_streaming_raises_not_found(stack):
    client = openai_client(stack)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=USER, stream=True)


def test_openai_sdk_empty_messages_raises_bad_request(stack):
    client = openai_client(stack)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="mock-text", messages=[])
    assert info.value.status_code == 400
    assert info.value.param == "messages"


def test_anthropic_sdk_unknown_model_raises_not_found(stack):
    client = anthropic_client(stack)
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(model="no-such-model", max_tokens=10, messages=USER)
    assert info.value.status_code == 404
    assert info.value.body["error"]["type"] == "not_found_error"


def test_anthropic_sdk_unknown_model_streaming_raises_not_found(stack):
    client = anthropic_client(stack)
    with (
        pytest.raises(anthropic.NotFoundError),
        client.messages.stream(model="no-such-model", max_tokens=10, messages=USER) as stream,
    ):
        stream.get_final_message()


def test_anthropic_sdk_bad_max_tokens_raises_bad_request(stack):
    client = anthropic_client(stack)
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="mock-text", max_tokens=0, messages=USER)
    assert info.value.status_code == 400
    assert info.value.body["error"]["type"] == "invalid_request_error"


# --- fields the gateway reads, and bodies it must re-encode --------------------------------------


@pytest.mark.parametrize("stream_options", ["yes", 1, True, ["include_usage"]])
def test_stream_options_not_an_object(stack, stream_options):
    """An OpenAI field the gateway reads; Anthropic bodies have none, and an unknown field of
    theirs is kept as sent (forward compatibility)."""
    payload = {**valid_body(OA), "stream": True, "stream_options": stream_options}
    status, headers, body = post(stack.urls["withhold"], OA, payload)
    error = assert_error(FORMAT[OA], status, headers, body, 400)
    assert "stream_options" in error["message"]
    assert error["param"] == "stream_options"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_stream_options_null_or_object_still_work(stack, path):
    for stream_options in (None, {}, {"include_usage": True}):
        payload = {**valid_body(path), "stream": True, "stream_options": stream_options}
        status, _, body = post(stack.urls["withhold"], path, payload)
        assert status == 200, body


def nested(depth: int) -> dict[str, Any]:
    """A JSON schema `depth` objects deep."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth - 1):
        schema = {"type": "object", "properties": {"SECRET_KEY": schema}}
    return schema


def openai_tools(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "parameters": schema}}]


def anthropic_tools(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "f", "input_schema": schema}]


DEEP = 300  # past orjson's 254 levels when the gateway encodes the body again (json.dumps sends it)


@pytest.mark.parametrize(
    ("path", "prefix", "field", "extra"),
    [
        # cross-format: the translated body is encoded again
        (OA, "an", "tools[0].function.parameters", {"tools": openai_tools(nested(DEEP))}),
        (AN, "oa", "tools[0].input_schema", {"tools": anthropic_tools(nested(DEEP))}),
        (
            AN,
            "oa",
            "messages[1].content[0].input",
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "t1", "name": "f", "input": nested(DEEP)}
                        ],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                    },
                ]
            },
        ),
        # same format, but the route renames the model: encoded again too
        (OA, "oa-renamed", "tools[0].function.parameters", {"tools": openai_tools(nested(DEEP))}),
    ],
    ids=["openai-to-anthropic", "anthropic-to-openai", "tool-use-input", "renamed"],
)
def test_body_nested_too_deep_is_a_400_naming_the_field(
    stack, upstream, unique_model, path, prefix, field, extra
):
    model = "oa-renamed" if prefix == "oa-renamed" else unique_model(prefix)
    upstream.script(model, Script(body=b"{}"))
    payload = {**valid_body(path, model), **extra}
    status, headers, body = post(stack.urls["withhold"], path, json.dumps(payload).encode())
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert field in error["message"]
    assert "SECRET_KEY" not in error["message"]  # the client's own keys are not echoed
    if path == OA:
        assert error["param"] == field
    if prefix != "oa-renamed":
        assert upstream.received[model] == []


def test_tool_arguments_nested_too_deep_is_a_400_naming_the_field(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, Script(body=b"{}"))
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
    call["function"]["arguments"] = json.dumps(nested(DEEP))
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    payload = {"model": model, "messages": messages}
    status, headers, body = post(stack.urls["withhold"], OA, payload)
    error = assert_error("openai", status, headers, body, 400)
    assert error["param"] == "messages[1].tool_calls[0].function.arguments"
    assert upstream.received[model] == []


@pytest.mark.parametrize("path", ENDPOINTS)
def test_same_format_body_nested_deep_is_forwarded_unchanged(stack, upstream, unique_model, path):
    """The gateway never encodes the client's own bytes again on a same-format route, so it
    neither walks them nor refuses them: the upstream judges its own limits."""
    model = unique_model("oa" if path == OA else "an")
    answer = Answer(text="deep")
    wire = "openai" if path == OA else "anthropic"
    upstream.script(model, script_for(wire, answer, model, stream=False))
    tools = openai_tools(nested(DEEP)) if path == OA else anthropic_tools(nested(DEEP))
    raw = json.dumps({**valid_body(path, model), "tools": tools}).encode()
    status, _, body = post(stack.urls["withhold"], path, raw)
    assert status == 200, body[:300]
    assert upstream.last(model).body == raw


@pytest.mark.parametrize(
    ("path", "prefix", "messages", "field"),
    [
        (OA, "an", [{"role": "SECRET-role", "content": "hi"}], "messages[0].role"),
        (AN, "oa", [{"role": {"SECRET": 1}, "content": "hi"}], "messages[0].role"),
        (
            OA,
            "an",
            [{"role": "user", "content": [{"type": "SECRET-part", "x": 1}]}],
            "messages[0].content[0].type",
        ),
    ],
    ids=["openai-role", "anthropic-role", "openai-part-type"],
)
def test_translator_refusals_do_not_echo_client_values(
    stack, upstream, unique_model, path, prefix, messages, field
):
    model = unique_model(prefix)
    upstream.script(model, Script(body=b"{}"))
    payload = {**valid_body(path, model), "messages": messages}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert field in error["message"]
    assert "SECRET" not in error["message"]


def anthropic_conversation(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {}}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f"}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text"}]}
                ],
            },
        ],
    }
    body["messages"][2]["content"][0]["content"][0]["text"] = "ok"
    return {**body, **changes}


def openai_conversation(tool_calls: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": tool_calls},
        ]
    }


# Inputs that reached a 500 (found by tests/test_fuzz_bodies.py, or while fixing what it found),
# each a 400 naming the field now: (endpoint, route prefix, body fields, the field named).
FOUND = [
    # Anthropic -> OpenAI translator: an unhashable tool_choice type
    (AN, "oa", anthropic_conversation(tool_choice={"type": ["tool"]}), "tool_choice"),
    (AN, "oa", anthropic_conversation(tool_choice={"type": {"a": 1}}), "tool_choice"),
    # Anthropic -> OpenAI translator: a text block whose text is not a string
    (AN, "oa", anthropic_conversation(system=[{"type": "text", "text": 5}]), "system[0].text"),
    (
        AN,
        "oa",
        anthropic_conversation(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text"}]}
                    ],
                }
            ]
        ),
        "messages[0].content[0].content[0].text",
    ),
    # the runaway guard, on every route: tool_calls of the wrong shape
    (OA, "oa", openai_conversation(5), "messages[1].tool_calls"),
    (OA, "an", openai_conversation([{"function": "f"}]), "messages[1].tool_calls[0].function"),
    # the mock provider (same format for an Anthropic client): tools or stop sequences that are
    # not arrays
    (AN, "mock", {"tools": True}, "tools"),
    (AN, "mock", {"stop_sequences": 7}, "stop_sequences"),
]
# The same shapes on routes where a translator already refused them: still refused, same field.
ALREADY_400 = [
    (OA, "mock", openai_conversation(["call"]), "messages[1].tool_calls[0]"),
    (OA, "mock", {"tools": 5}, "tools"),
    (
        OA,
        "an",
        {"messages": [{"role": "user", "content": [{"type": ["text"], "text": "hi"}]}]},
        "messages[0].content[0].type",
    ),
]


@pytest.mark.parametrize(("path", "prefix", "fields", "field"), FOUND + ALREADY_400)
def test_inputs_that_reached_a_500_are_a_400_naming_the_field(
    stack, upstream, unique_model, path, prefix, fields, field
):
    model = "mock-agent" if prefix == "mock" else unique_model(prefix)
    if prefix != "mock":
        upstream.script(model, Script(body=b"{}"))
    payload = {**valid_body(path, model), **fields}
    status, headers, body = post(stack.urls["withhold"], path, payload)
    error = assert_error(FORMAT[path], status, headers, body, 400)
    assert field in error["message"]
    if path == OA:
        assert error["param"] == field


def test_deep_tool_arguments_pass_unchanged_on_a_same_format_route(stack, upstream, unique_model):
    # An arguments *string* may hold JSON of any depth: forwarded as sent, and the runaway
    # guard compares it as text instead of failing to re-encode it.
    model = unique_model("oa")
    upstream.script(model, script_for("openai", Answer(text="ok"), model, stream=False))
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
    call["function"]["arguments"] = json.dumps(nested(DEEP))
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    raw = orjson.dumps({"model": model, "messages": messages})
    status, _, body = post(stack.urls["withhold"], OA, raw)
    assert status == 200, body
    assert upstream.last(model).body == raw
