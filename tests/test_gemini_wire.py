"""A Gemini upstream behind the gateway, for Chat Completions, Messages and Responses clients.

Real HTTP all the way: the openai SDK (chat completions and `responses`) and the anthropic SDK
talk to a gateway built with `build_app`, whose provider of kind `gemini` talks to a loopback
upstream speaking the Gemini wire (tests/gemini_upstream.py). Every case runs streamed and not
for each client format: text, one and two tool calls and the next turn's results (the function
name found, the thought signature restored), every finish-reason row, a blocked prompt, cut
calls withheld and passed, broken streams, upstream error statuses, usage.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from gateway.events import StopReason
from gateway.formats import gemini_ids
from gateway.formats.stop_reasons import (
    BLOCK_REASON_PREFIX,
    GEMINI_BLOCK_REASONS,
    GEMINI_NATIVE,
    to_anthropic,
    to_openai,
    to_responses,
)
from tests.gemini_upstream import (
    GEMINI_KEY,
    RESPONSE_ID,
    SIGNATURE,
    USAGE,
    GeminiStack,
    answer,
    blocked,
    call,
    chunk,
    error_body,
    gemini_sse,
    text,
    thought,
)
from tests.upstream import Received, Script

CLIENTS = ("openai", "anthropic", "responses")
MODES = [
    pytest.param(client, stream, id=f"{client}-{'stream' if stream else 'whole'}")
    for client in CLIENTS
    for stream in (False, True)
]
STREAMED = [pytest.param(client, id=client) for client in CLIENTS]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = ("weather", "time")
PROMPT = "Weather in Zürich?"


@pytest.fixture(scope="module")
def gstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeminiStack]:
    stack = GeminiStack(Path(tmp_path_factory.mktemp("gemini-audit")))
    stack.start()
    yield stack
    stack.stop()


@dataclass
class Got:
    """What a client saw, in the same terms for every format."""

    text: str = ""
    thinking: str = ""
    tools: list[tuple[str, str, Any]] = field(default_factory=list)  # id, name, parsed args
    stop: Any = None  # finish_reason / stop_reason / (status, incomplete reason)
    gateway: dict[str, Any] | None = None
    usage: Any = None
    error: Exception | None = None
    received: Received | None = None


def model_name(prefix: str = "gm") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def tools_for(client: str, names: tuple[str, ...]) -> list[dict[str, Any]]:
    if client == "openai":
        return [{"type": "function", "function": {"name": n, "parameters": SCHEMA}} for n in names]
    if client == "anthropic":
        return [{"name": n, "input_schema": SCHEMA} for n in names]
    return [{"type": "function", "name": n, "parameters": SCHEMA} for n in names]


def _openai(client: openai.OpenAI, got: Got, kwargs: dict[str, Any], stream: bool) -> None:
    if not stream:
        completion = client.chat.completions.create(**kwargs)
        got.gateway = (completion.model_extra or {}).get("gateway")
        choice = completion.choices[0]
        got.stop, got.usage = choice.finish_reason, completion.usage
        got.text = choice.message.content or ""
        for c in choice.message.tool_calls or ():
            got.tools.append((c.id, c.function.name, json.loads(c.function.arguments or "{}")))
        return
    calls: dict[int, list[str]] = {}
    kwargs["stream_options"] = {"include_usage": True}
    for piece in client.chat.completions.create(stream=True, **kwargs):
        extra = piece.model_extra or {}
        if piece.usage is not None:
            got.usage = piece.usage
        for choice in piece.choices:
            got.text += choice.delta.content or ""
            for delta in choice.delta.tool_calls or ():
                slot = calls.setdefault(delta.index, ["", "", ""])
                slot[0] = delta.id or slot[0]
                slot[1] = (delta.function.name if delta.function else None) or slot[1]
                slot[2] += (delta.function.arguments if delta.function else None) or ""
            if choice.finish_reason is not None:
                got.stop = choice.finish_reason
                got.gateway = extra.get("gateway")
    got.tools = [(i, n, json.loads(a or "{}")) for i, n, a in calls.values()]


def _anthropic(client: anthropic.Anthropic, got: Got, kwargs: dict[str, Any], stream: bool) -> None:
    if stream:
        with client.messages.stream(**kwargs) as events:
            for event in events:
                if event.type == "message_delta":
                    got.gateway = (event.model_extra or {}).get("gateway")
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
        got.gateway = (message.model_extra or {}).get("gateway")
    got.stop, got.usage = message.stop_reason, message.usage
    for block in message.content:
        if block.type == "text":
            got.text += block.text
        elif block.type == "thinking":
            got.thinking += block.thinking
        elif block.type == "tool_use":
            got.tools.append((block.id, block.name, block.input))


def _responses(client: openai.OpenAI, got: Got, kwargs: dict[str, Any], stream: bool) -> None:
    kwargs["input"] = kwargs.pop("messages")
    kwargs.pop("max_tokens", None)
    if stream:
        response = None
        for event in client.responses.create(stream=True, **kwargs):
            if event.type in ("response.completed", "response.incomplete", "response.failed"):
                response = event.response
        assert response is not None, "no terminal event"
    else:
        response = client.responses.create(**kwargs)
    got.gateway = (response.model_extra or {}).get("gateway")
    reason = response.incomplete_details.reason if response.incomplete_details else None
    got.stop, got.usage = (response.status, reason), response.usage
    for item in response.output:
        if item.type == "message":
            got.text += "".join(p.text for p in item.content if p.type == "output_text")
        elif item.type == "function_call":
            got.tools.append((item.call_id, item.name, json.loads(item.arguments or "{}")))


def drive(
    gstack: GeminiStack,
    client: str,
    stream: bool,
    script: Script,
    *then: Script,
    policy: str = "withhold",
    tools: tuple[str, ...] = TOOLS,
    messages: Any = None,
    model: str | None = None,
    **extra: Any,
) -> Got:
    model = model or model_name()
    gstack.upstream.script(model, script, *then)
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages or [{"role": "user", "content": PROMPT}],
        **extra,
    }
    if tools:
        kwargs["tools"] = tools_for(client, tools)
    got = Got()
    try:
        if client == "openai":
            _openai(gstack.openai(policy), got, kwargs, stream)
        elif client == "anthropic":
            kwargs.setdefault("max_tokens", 256)
            _anthropic(gstack.anthropic(policy), got, kwargs, stream)
        else:
            _responses(gstack.openai(policy), got, kwargs, stream)
    except (openai.APIError, anthropic.APIError) as exc:
        got.error = exc
    received = gstack.upstream.received.get(model) or []
    got.received = received[-1] if received else None
    return got


def client_stop(client: str, reason: Any, has_calls: bool = False) -> Any:
    if client == "openai":
        return to_openai(reason, has_calls)
    if client == "anthropic":
        return to_anthropic(reason, has_calls, None)
    return to_responses(reason)


def check_gateway(got: Got, stop: str, native: str, truncated: bool, withheld: Any = ()) -> None:
    ext = got.gateway
    assert isinstance(ext, dict), got
    assert ext["stop_reason"] == stop
    assert ext["native_stop_reason"] == native
    assert ext["provider"] == "gemini"
    assert ext["truncated"] is truncated
    assert ext["withheld_tool_calls"] == list(withheld)


# --- what the upstream receives ------------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_the_upstream_gets_a_gemini_body_at_its_url_with_the_providers_key(gstack, client, stream):
    got = drive(gstack, client, stream, answer([text("Sunny.")], stream=stream))
    assert got.error is None and got.text == "Sunny."
    sent = got.received
    assert sent is not None
    model = sent.path.split("/")[-1].split(":")[0]
    if stream:
        assert sent.path == f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
    else:
        assert sent.path == f"/v1beta/models/{model}:generateContent"
    headers = {k.lower(): v for k, v in sent.headers.items()}
    assert headers["x-goog-api-key"] == GEMINI_KEY
    assert "authorization" not in headers and "x-api-key" not in headers
    body = sent.json
    assert "model" not in body and "stream" not in body
    assert body["contents"] == [{"role": "user", "parts": [{"text": PROMPT}]}]
    declarations = body["tools"][0]["functionDeclarations"]
    assert [(d["name"], d["parametersJsonSchema"]) for d in declarations] == [
        (name, SCHEMA) for name in TOOLS
    ]


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_without_a_configured_key_the_clients_own_goes_as_the_gemini_key(gstack, client):
    got = drive(
        gstack, client, False, answer([text("ok")], stream=False), model=model_name("gm-own")
    )
    assert got.error is None
    assert got.received is not None
    headers = {k.lower(): v for k, v in got.received.headers.items()}
    assert headers["x-goog-api-key"] == "sk-client"
    assert "authorization" not in headers


def test_system_sampling_and_thinking_reach_the_generation_config(gstack):
    got = drive(
        gstack,
        "anthropic",
        False,
        answer([text("ok")], stream=False),
        system="Be brief.",
        max_tokens=300,
        extra_body={"temperature": 0.2, "top_k": 5},  # anthropic 2.14 dropped these params
        stop_sequences=["END"],
        thinking={"type": "enabled", "budget_tokens": 2048},
        tool_choice={"type": "tool", "name": "time"},
    )
    assert got.error is None and got.received is not None
    body = got.received.json
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["generationConfig"] == {
        "maxOutputTokens": 300,
        "temperature": 0.2,
        "topK": 5,
        "stopSequences": ["END"],
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["time"]}
    }


def test_an_openai_client_without_max_tokens_sends_no_output_budget(gstack):
    got = drive(gstack, "openai", False, answer([text("ok")], stream=False), tools=())
    assert got.received is not None
    assert "maxOutputTokens" not in got.received.json.get("generationConfig", {})


def test_what_cannot_be_carried_is_named(gstack):
    got = drive(gstack, "openai", False, answer([text("ok")], stream=False), seed=7, tools=())
    assert got.gateway is not None
    assert "seed" in got.gateway["dropped_fields"]


# --- text, thinking, usage -----------------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_text(gstack, client, stream):
    got = drive(gstack, client, stream, answer([text("Sun"), text("ny.")], stream=stream))
    assert got.error is None
    assert got.text == "Sunny." and got.tools == []
    assert got.stop == client_stop(client, GEMINI_NATIVE["STOP"])
    check_gateway(got, "stop", "STOP", False)


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_usage_counts_thoughts_and_cached_tokens(gstack, client, stream):
    got = drive(gstack, client, stream, answer([text("ok")], stream=stream))
    usage = got.usage
    prompt, cached = USAGE["promptTokenCount"], USAGE["cachedContentTokenCount"]
    output = USAGE["candidatesTokenCount"] + USAGE["thoughtsTokenCount"]
    if client == "openai":
        assert (usage.prompt_tokens, usage.completion_tokens) == (prompt, output)
        assert usage.prompt_tokens_details.cached_tokens == cached
        assert usage.completion_tokens_details.reasoning_tokens == USAGE["thoughtsTokenCount"]
    elif client == "anthropic":
        assert usage.input_tokens + usage.cache_read_input_tokens == prompt
        assert (usage.cache_read_input_tokens, usage.output_tokens) == (cached, output)
    else:
        assert (usage.input_tokens, usage.output_tokens) == (prompt, output)
        assert usage.input_tokens_details.cached_tokens == cached
        assert usage.output_tokens_details.reasoning_tokens == USAGE["thoughtsTokenCount"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_thoughts_reach_an_anthropic_client_as_thinking(gstack, stream):
    parts = [thought("Let me think."), text("Sunny.")]
    got = drive(gstack, "anthropic", stream, answer(parts, stream=stream))
    assert (got.thinking, got.text) == ("Let me think.", "Sunny.")


# --- tool calls and the next turn ----------------------------------------------------------------


def minted(*signatures: str | None) -> list[str]:
    return [gemini_ids.mint(RESPONSE_ID, n, s) for n, s in enumerate(signatures)]


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_one_tool_call(gstack, client, stream):
    parts = [call("weather", {"city": "Zürich"}, SIGNATURE)]
    got = drive(gstack, client, stream, answer(parts, stream=stream))
    assert got.error is None
    assert got.tools == [(minted(SIGNATURE)[0], "weather", {"city": "Zürich"})]
    assert got.stop == client_stop(client, StopReason.TOOL_CALLS, True)
    check_gateway(got, "tool_calls", "STOP", False)


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_parallel_tool_calls(gstack, client, stream):
    parts = [
        text("Checking."),
        call("weather", {"city": "Zürich"}, SIGNATURE),
        call("time", {"zone": "Europe/Zurich", "list": [1, {"x": None}]}),
    ]
    got = drive(gstack, client, stream, answer(parts, stream=stream))
    assert got.error is None and got.text == "Checking."
    assert got.tools == [
        (minted(SIGNATURE, None)[0], "weather", {"city": "Zürich"}),
        (minted(SIGNATURE, None)[1], "time", {"zone": "Europe/Zurich", "list": [1, {"x": None}]}),
    ]
    check_gateway(got, "tool_calls", "STOP", False)


def second_turn(client: str, tools: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """The conversation the client sends back: the prompt, its calls, and their results."""
    user = {"role": "user", "content": PROMPT}
    if client == "openai":
        calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in tools
        ]
        results = [{"role": "tool", "tool_call_id": i, "content": f"{n} ok"} for i, n, _ in tools]
        return [user, {"role": "assistant", "content": None, "tool_calls": calls}, *results]
    if client == "anthropic":
        uses = [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in tools]
        results = [
            {"type": "tool_result", "tool_use_id": i, "content": f"{n} ok"} for i, n, _ in tools
        ]
        return [user, {"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    items: list[dict[str, Any]] = [user]
    items += [
        {"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
        for i, n, a in tools
    ]
    items += [
        {"type": "function_call_output", "call_id": i, "output": f"{n} ok"} for i, n, _ in tools
    ]
    return items


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_the_next_turn_restores_names_and_thought_signatures(gstack, client, stream):
    parts = [call("weather", {"city": "Zürich"}, SIGNATURE), call("time", {})]
    model = model_name()
    first = drive(
        gstack,
        client,
        stream,
        answer(parts, stream=stream),
        answer([text("Done.")], stream=stream),
        model=model,
    )
    assert len(first.tools) == 2
    got = drive_again(gstack, client, stream, model, second_turn(client, first.tools))
    assert got.error is None and got.text == "Done."
    contents = got.received.json["contents"] if got.received else []
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"] == [
        {
            "functionCall": {"name": "weather", "args": {"city": "Zürich"}},
            "thoughtSignature": SIGNATURE,
        },
        {"functionCall": {"name": "time", "args": {}}},
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "weather", "response": {"output": "weather ok"}}},
        {"functionResponse": {"name": "time", "response": {"output": "time ok"}}},
    ]


def drive_again(gstack: GeminiStack, client: str, stream: bool, model: str, messages: Any) -> Got:
    """The next request under `model`, answered by the script already queued for it."""
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "tools": tools_for(client, TOOLS),
    }
    got = Got()
    if client == "openai":
        _openai(gstack.openai(), got, kwargs, stream)
    elif client == "anthropic":
        _anthropic(gstack.anthropic(), got, {**kwargs, "max_tokens": 256}, stream)
    else:
        _responses(gstack.openai(), got, kwargs, stream)
    got.received = gstack.upstream.received[model][-1]
    return got


def test_a_tool_result_for_an_unknown_call_is_refused(gstack):
    messages = [
        {"role": "user", "content": PROMPT},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x"}]},
    ]
    got = drive(gstack, "anthropic", False, answer([text("x")], stream=False), messages=messages)
    assert isinstance(got.error, anthropic.BadRequestError)
    assert got.received is None


# --- stop reasons --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "native", [n for n in GEMINI_NATIVE if not n.startswith(BLOCK_REASON_PREFIX)]
)
@pytest.mark.parametrize(("client", "stream"), MODES)
def test_every_finish_reason_row(gstack, client, stream, native):
    reason = GEMINI_NATIVE[native]
    got = drive(gstack, client, stream, answer([text("Part")], native, stream=stream), tools=())
    cut = reason.value in ("length", "context_window")
    check_gateway(got, reason.value, native, cut)
    assert got.stop == client_stop(client, reason)
    assert got.text == "Part"


@pytest.mark.parametrize("reason", GEMINI_BLOCK_REASONS)
@pytest.mark.parametrize(("client", "stream"), MODES)
def test_a_blocked_prompt_is_a_content_filter(gstack, client, stream, reason):
    body = blocked(reason)
    script = Script(chunks=gemini_sse([body])) if stream else Script(body=json.dumps(body).encode())
    got = drive(gstack, client, stream, script, tools=())
    assert got.error is None
    check_gateway(got, "content_filter", BLOCK_REASON_PREFIX + reason, False)
    assert got.stop == client_stop(client, GEMINI_NATIVE["SAFETY"])
    assert got.text == ""


# --- cut tool calls ------------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_a_call_cut_by_max_tokens_is_withheld(gstack, client, stream):
    parts = [text("Let me check."), call("weather", {"city": "Zü"}, SIGNATURE)]
    got = drive(gstack, client, stream, answer(parts, "MAX_TOKENS", stream=stream))
    call_id = minted(SIGNATURE)[0]
    assert got.tools == []
    assert got.text == "Let me check."
    assert got.stop == client_stop(client, GEMINI_NATIVE["MAX_TOKENS"])
    check_gateway(got, "length", "MAX_TOKENS", True, [{"id": call_id, "name": "weather"}])


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_a_call_cut_by_max_tokens_is_passed_when_asked(gstack, client, stream):
    parts = [call("weather", {"city": "Zü"}, SIGNATURE)]
    got = drive(gstack, client, stream, answer(parts, "MAX_TOKENS", stream=stream), policy="pass")
    assert got.tools == [(minted(SIGNATURE)[0], "weather", {"city": "Zü"})]
    assert got.stop == client_stop(client, GEMINI_NATIVE["MAX_TOKENS"], True)
    check_gateway(got, "length", "MAX_TOKENS", True)


# --- broken streams ------------------------------------------------------------------------------


def stream_ends_in_error(client: str, got: Got) -> None:
    """The client was told the stream broke: an SDK error, or a failed Responses terminal."""
    if client == "responses" and got.error is None:
        assert got.stop[0] == "failed"
        assert got.gateway is not None and got.gateway["truncated"] is True
    else:
        assert got.error is not None
    assert got.stop not in ("stop", "end_turn", "tool_calls", "tool_use")


@pytest.mark.parametrize("client", STREAMED)
def test_a_stream_without_a_finish_reason_is_truncated(gstack, client):
    chunks = gemini_sse([chunk([text("Sun")]), chunk([call("weather", {"city": "Z"})])])
    got = drive(gstack, client, True, Script(chunks=chunks))
    stream_ends_in_error(client, got)
    assert got.tools == []  # a call of a truncated stream is never handed over


@pytest.mark.parametrize("client", STREAMED)
def test_a_broken_connection(gstack, client):
    chunks = gemini_sse([chunk([text("Sun")]), chunk([text("ny")]), chunk([], "STOP")])
    got = drive(gstack, client, True, Script(chunks=chunks, drop_after=1))
    stream_ends_in_error(client, got)


@pytest.mark.parametrize("client", STREAMED)
def test_an_error_frame_mid_stream(gstack, client):
    error = {"error": {"code": 500, "message": "Internal error.", "status": "INTERNAL"}}
    chunks = gemini_sse([chunk([text("Sun")]), error])
    got = drive(gstack, client, True, Script(chunks=chunks))
    stream_ends_in_error(client, got)


# --- upstream errors -----------------------------------------------------------------------------

OPENAI_TYPES = {
    400: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable_error",
    504: "timeout_error",
}
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}
GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@pytest.mark.parametrize("status", sorted(GOOGLE_STATUSES))
@pytest.mark.parametrize(("client", "stream"), MODES)
def test_an_upstream_error_status_in_each_clients_format(gstack, client, stream, status):
    retry = "32s" if status == 429 else None
    body = error_body(status, GOOGLE_STATUSES[status], "Upstream says no.", retry)
    got = drive(gstack, client, stream, Script(status=status, body=body))
    error = got.error
    assert isinstance(error, openai.APIStatusError | anthropic.APIStatusError), got
    assert error.status_code == status
    payload = error.body
    if client == "anthropic":
        assert isinstance(payload, dict)
        assert payload["type"] == "error"
        assert payload["error"]["type"] == ANTHROPIC_TYPES[status]
        assert payload["error"]["message"] == "Upstream says no."
    else:
        assert isinstance(payload, dict)  # the openai SDK hands over body["error"]
        assert payload["type"] == OPENAI_TYPES[status]
        assert payload["message"] == "Upstream says no."
        code = GOOGLE_STATUSES[status]
        if client == "responses" and status == 429:
            code = "rate_limit_exceeded"  # what Codex retries on
        assert payload["code"] == code
    headers = error.response.headers
    assert headers.get("retry-after") == ("32" if status == 429 else None)


# --- the audit trail -----------------------------------------------------------------------------


def audit_row(gstack: GeminiStack, model: str) -> tuple[Any, ...]:
    """The exchange's record, once the gateway's writer flushed it (it writes off the loop)."""
    deadline = time.monotonic() + 10
    while True:
        with contextlib.closing(sqlite3.connect(gstack.audit_db())) as db:
            rows = db.execute(
                "SELECT provider, upstream_model, stop_reason, native_stop_reason, truncated,"
                " withheld_tool_calls FROM audit_records WHERE model = ?",
                (model,),
            ).fetchall()
        if rows or time.monotonic() > deadline:
            assert rows, "no audit record"
            return rows[0]
        time.sleep(0.05)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_record_keeps_the_native_stop_reason_and_the_withheld_call(gstack, stream):
    model = model_name()
    parts = [call("weather", {"city": "Zü"})]
    drive(gstack, "openai", stream, answer(parts, "MAX_TOKENS", stream=stream), model=model)
    provider, upstream_model, stop, native, truncated, withheld = audit_row(gstack, model)
    assert (provider, upstream_model, stop, native) == ("gemini", model, "length", "MAX_TOKENS")
    assert truncated
    assert json.loads(withheld) == [{"id": minted(None)[0], "name": "weather"}]
