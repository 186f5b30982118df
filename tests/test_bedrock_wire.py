"""An AWS Bedrock (Converse) upstream behind the gateway, for Chat, Messages and Responses clients.

Real HTTP all the way: the openai and anthropic SDKs talk to a gateway built with `build_app`,
whose provider of kind `bedrock` signs each request with SigV4 (credentials from the AWS
environment variables; no config file or instance metadata is read) or sends a Bedrock API key,
to a loopback upstream speaking Converse and ConverseStream's binary event stream
(tests/bedrock_upstream.py), which checks the signature's shape. Cases: what the upstream gets,
text, one and parallel tool calls, every native stop reason, a tool call cut at max_tokens
(withheld and passed), broken streams (dropped mid-message, bad CRC, exception events), error
replies, usage with cache tokens, temporary credentials, and credential refreshes off the loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest
from botocore.credentials import Credentials, RefreshableCredentials

from gateway.formats.stop_reasons import BEDROCK_NATIVE
from providers.base import ProviderRequest
from providers.bedrock import BedrockProvider
from tests.bedrock_upstream import (
    REGION,
    BedrockStack,
    BedrockUpstream,
    converse_body,
    error_reply,
    event_stream,
    exception_message,
    gateway_settings,
    stream_events,
    text_blocks,
    tool_blocks,
)
from tests.test_matrix_support import (
    Seen,
    _anthropic_sync,
    _openai_sync,
    check_error_ending,
    raw_stream,
)
from tests.upstream import Script

AKID = "AKIATESTEXAMPLE0001"
SECRET = "test-secret-SECRET-do-not-log"
CLIENTS = ("openai", "anthropic")
MODES = [
    pytest.param(client, stream, id=f"{client}-{'stream' if stream else 'whole'}")
    for client in CLIENTS
    for stream in (False, True)
]
TOOLS = ["weather", "time"]
WEATHER = ("tu_w1", "weather", '{"city": "Zürich", "unit": "c"}')
TIME = ("tu_t2", "time", '{"zone": "Europe/Zurich", "list": [1, 2, {"x": null}]}')


def isolate_aws(mp: pytest.MonkeyPatch, tmp: Path, **extra: str) -> None:
    """Credentials from the environment only: no shared file, profile or instance metadata."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        mp.delenv(name, raising=False)
    mp.setenv("AWS_CONFIG_FILE", str(tmp / "no-such-config"))
    mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp / "no-such-credentials"))
    mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
    mp.setenv("AWS_ACCESS_KEY_ID", AKID)
    mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    for name, value in extra.items():
        mp.setenv(name, value)


@pytest.fixture(scope="module")
def bstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BedrockStack]:
    tmp = Path(tmp_path_factory.mktemp("bedrock"))
    with pytest.MonkeyPatch.context() as mp:
        isolate_aws(mp, tmp)
        stack = BedrockStack(tmp)
        stack.start()
        yield stack
        stack.stop()


def model_name(prefix: str = "br") -> str:
    """A Bedrock-style model id: its `:` must reach the upstream URL-quoted."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}-v1:0"


def stream_script(events: list[tuple[str, dict[str, Any]]], **script: Any) -> Script:
    """One chunk per message, so a drop can fall between or (split) inside messages."""
    return Script(chunks=[event_stream([event]) for event in events], **script)


def answer(
    blocks: list[tuple[str, dict[str, Any]]],
    content: list[dict[str, Any]],
    stream: bool,
    stop: str = "end_turn",
    **kw: Any,
) -> Script:
    if stream:
        return stream_script(stream_events(blocks, stop, **kw))
    return Script(body=converse_body(content, stop, **kw))


def text_answer(text: str, stream: bool, stop: str = "end_turn", **kw: Any) -> Script:
    return answer(text_blocks(text), [{"text": text}], stream, stop, **kw)


def tool_answer(
    calls: list[tuple[str, str, str]], stream: bool, text: str = "", stop: str = "tool_use"
) -> Script:
    blocks = text_blocks(text) if text else []
    content: list[dict[str, Any]] = [{"text": text}] if text else []
    for n, (call_id, name, arguments) in enumerate(calls):
        blocks += tool_blocks(n + bool(text), call_id, name, arguments)
        input_ = json.loads(arguments)
        content.append({"toolUse": {"toolUseId": call_id, "name": name, "input": input_}})
    return answer(blocks, content, stream, stop)


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
    bstack: BedrockStack,
    client: str,
    stream: bool,
    script: Script,
    *,
    policy: str = "withhold",
    tools: list[str] | None = None,
    model: str | None = None,
    **extra: Any,
) -> Seen:
    model = model or model_name()
    bstack.upstream.script(model, script)
    kwargs = {**kwargs_for(client, model, TOOLS if tools is None else tools), **extra}
    seen = Seen(model)
    if client == "openai":
        _openai_sync(bstack.openai(policy), seen, kwargs, stream)
    else:
        _anthropic_sync(bstack.anthropic(policy), seen, kwargs, stream)
    got = bstack.upstream.received.get(model) or []
    seen.received = got[-1] if got else None
    return seen


def check_gateway(seen: Seen, stop: str, native: str, truncated: bool, withheld: Any = ()) -> None:
    ext = seen.gateway
    assert isinstance(ext, dict), seen.stream_kinds
    assert ext["stop_reason"] == stop
    assert ext["native_stop_reason"] == native
    assert ext["provider"] == "bedrock"
    assert ext["truncated"] is truncated
    assert ext["withheld_tool_calls"] == list(withheld)


def check_calls(seen: Seen, calls: list[tuple[str, str, str]]) -> None:
    assert [(t.id, t.name) for t in seen.tools] == [(c[0], c[1]) for c in calls]
    for got, want in zip(seen.tools, calls, strict=True):
        assert got.args == json.loads(want[2])


# --- what the upstream receives -------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_the_upstream_gets_a_signed_converse_body_at_the_quoted_model_path(bstack, client, stream):
    failures = len(bstack.upstream.auth_failures)
    seen = drive(bstack, client, stream, text_answer("Sunny.", stream))
    assert seen.error is None, (seen.error, bstack.upstream.auth_failures)
    assert len(bstack.upstream.auth_failures) == failures
    got = seen.received
    assert got is not None
    quoted = seen.model.replace(":", "%3A")
    assert got.path == f"/model/{seen.model}/{'converse-stream' if stream else 'converse'}"
    assert got.headers["Authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={AKID}/")
    assert "x-amz-security-token" not in {k.lower() for k in got.headers}
    assert SECRET not in str(got.headers)
    accept = "application/vnd.amazon.eventstream" if stream else "application/json"
    assert got.headers["Accept"] == accept
    body = got.json
    assert "model" not in body and "stream" not in body
    assert body["messages"] == [{"role": "user", "content": [{"text": "Weather in Zürich?"}]}]
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == TOOLS
    assert body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {
        "json": {"type": "object", "properties": {}}
    }
    if client == "anthropic":
        assert body["inferenceConfig"] == {"maxTokens": 256}
    else:
        assert "inferenceConfig" not in body  # no default budget: Converse's is optional
    assert quoted != seen.model  # the id has a `:` the gateway sent as %3A


def test_the_model_id_is_sent_url_quoted_as_signed(bstack):
    """The raw request line holds `%3A` (and `%2F` for an ARN), the path SigV4 signed."""
    arn = f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{model_name()}"
    for model in (model_name(), arn):
        bstack.upstream.script(model, text_answer("ok", False))
        client = bstack.openai()
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        quoted = model.replace(":", "%3A").replace("/", "%2F")
        assert bstack.upstream.raw_paths[-1] == f"/model/{quoted}/converse"
    assert bstack.upstream.auth_failures == []


def test_a_configured_api_key_is_sent_as_a_bearer_token(bstack):
    model = model_name("brk")
    seen = drive(bstack, "openai", True, text_answer("Keyed.", True), model=model)
    assert seen.error is None and seen.text == "Keyed."
    assert seen.received is not None
    assert seen.received.headers["Authorization"] == "Bearer bedrock-api-key-SECRET-0003"
    assert "X-Amz-Date" not in seen.received.headers


BERN = {"city": "Bern"}


def test_the_anthropic_request_is_translated_field_by_field(bstack):
    model = model_name()
    bstack.upstream.script(model, text_answer("ok", False))
    message = bstack.anthropic().messages.create(
        model=model,
        max_tokens=100,
        extra_body={"temperature": 0.2, "top_p": 0.9, "top_k": 40},
        stop_sequences=["###"],
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        metadata={"user_id": "u-1"},
        thinking={"type": "enabled", "budget_tokens": 1024},
        tools=[
            {
                "name": "weather",
                "description": "Weather now",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        tool_choice={"type": "tool", "name": "weather"},
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Look it up.", "signature": "sig-1"},
                    {
                        "type": "tool_use",
                        "id": "tu_1",
                        "name": "weather",
                        "input": {"city": "Bern"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu_1",
                        "content": [{"type": "text", "text": "no data"}],
                        "is_error": True,
                    },
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
                    },
                ],
            },
        ],
    )
    assert message.content[0].text == "ok"
    body = bstack.upstream.last(model).json
    assert body["system"] == [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}]
    assert body["inferenceConfig"] == {
        "maxTokens": 100,
        "temperature": 0.2,
        "topP": 0.9,
        "stopSequences": ["###"],
    }
    assert body["additionalModelRequestFields"] == {
        "top_k": 40,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "weather",
                    "description": "Weather now",
                    "inputSchema": {
                        "json": {"type": "object", "properties": {"city": {"type": "string"}}}
                    },
                }
            }
        ],
        "toolChoice": {"tool": {"name": "weather"}},
    }
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"reasoningText": {"text": "Look it up.", "signature": "sig-1"}}},
            {"toolUse": {"toolUseId": "tu_1", "name": "weather", "input": {"city": "Bern"}}},
        ],
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "tu_1",
                    "content": [{"text": "no data"}],
                    "status": "error",
                }
            },
            {"image": {"format": "png", "source": {"bytes": "iVBORw0K"}}},
        ],
    }
    assert "metadata" not in body and "requestMetadata" not in body
    assert (message.model_extra or {})["gateway"]["dropped_fields"] == ["metadata"]


def test_tool_choice_none_leaves_the_tools_out(bstack):
    model = model_name()
    bstack.upstream.script(model, text_answer("ok", False))
    bstack.openai().chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hi"}],
        tools=[{"type": "function", "function": {"name": "weather", "parameters": {}}}],
        tool_choice="none",
    )
    assert "toolConfig" not in bstack.upstream.last(model).json


def test_the_openai_fields_converse_lacks_are_named_in_openai_terms(bstack):
    model = model_name()
    bstack.upstream.script(model, text_answer("ok", False))
    completion = bstack.openai().chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": "Sys."}, {"role": "user", "content": "hi"}],
        user="u-1",
        seed=7,
        max_completion_tokens=50,
        stop=["END"],
    )
    body = bstack.upstream.last(model).json
    assert body["system"] == [{"text": "Sys."}]
    assert body["inferenceConfig"] == {"maxTokens": 50, "stopSequences": ["END"]}
    ext = (completion.model_extra or {})["gateway"]
    assert ext["dropped_fields"] == ["seed", "user"]


# --- text and tool calls ----------------------------------------------------------------------


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_text(bstack, client, stream):
    text = "Sunny, 21 °C — ünïcödé 😀."
    seen = drive(bstack, client, stream, text_answer(text, stream))
    assert seen.error is None
    assert seen.text == text
    assert seen.tools == []
    assert seen.stop == ("stop" if client == "openai" else "end_turn")
    check_gateway(seen, "stop", "end_turn", truncated=False)


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_one_tool_call(bstack, client, stream):
    seen = drive(bstack, client, stream, tool_answer([WEATHER], stream))
    assert seen.error is None
    check_calls(seen, [WEATHER])
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    check_gateway(seen, "tool_calls", "tool_use", truncated=False)


@pytest.mark.parametrize(("client", "stream"), MODES)
def test_two_parallel_tool_calls_after_text(bstack, client, stream):
    seen = drive(bstack, client, stream, tool_answer([WEATHER, TIME], stream, "Checking."))
    assert seen.error is None
    assert seen.text == "Checking."
    check_calls(seen, [WEATHER, TIME])
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    check_gateway(seen, "tool_calls", "tool_use", truncated=False)


# --- every native stop reason -----------------------------------------------------------------

# native -> (normalized, OpenAI finish_reason, Anthropic stop_reason, Responses status/reason,
# truncated); docs/stop-reasons.md's rows (its table of every native stop reason).
STOP_ROWS: dict[str, tuple[str, str, str, tuple[str, str | None], bool]] = {
    "end_turn": ("stop", "stop", "end_turn", ("completed", None), False),
    "tool_use": ("tool_calls", "tool_calls", "tool_use", ("completed", None), False),
    "max_tokens": ("length", "length", "max_tokens", ("incomplete", "max_output_tokens"), True),
    "stop_sequence": ("stop_sequence", "stop", "stop_sequence", ("completed", None), False),
    "guardrail_intervened": (
        "content_filter",
        "content_filter",
        "refusal",
        ("incomplete", "content_filter"),
        False,
    ),
    "content_filtered": (
        "content_filter",
        "content_filter",
        "refusal",
        ("incomplete", "content_filter"),
        False,
    ),
    "malformed_model_output": ("malformed", "stop", "end_turn", ("failed", None), False),
    "malformed_tool_use": ("malformed", "stop", "end_turn", ("failed", None), False),
    "model_context_window_exceeded": (
        "context_window",
        "length",
        "model_context_window_exceeded",
        ("incomplete", "max_output_tokens"),
        True,
    ),
}


def test_the_stop_rows_cover_every_native_value():
    assert set(STOP_ROWS) == set(BEDROCK_NATIVE)


def stop_script(native: str, stream: bool) -> Script:
    if native == "tool_use":
        return tool_answer([WEATHER], stream)
    sequence = "###" if native == "stop_sequence" else None
    return text_answer("Some text.", stream, native, stop_sequence=sequence)


@pytest.mark.parametrize(("client", "stream"), MODES)
@pytest.mark.parametrize("native", sorted(BEDROCK_NATIVE))
def test_stop_rows(bstack, client, stream, native):
    stop, finish, anthropic_stop, _, cut = STOP_ROWS[native]
    seen = drive(bstack, client, stream, stop_script(native, stream))
    assert seen.error is None, seen.error
    assert seen.stop == (finish if client == "openai" else anthropic_stop)
    check_gateway(seen, stop, native, truncated=cut)
    if client == "anthropic" and native == "stop_sequence":
        assert seen.stop_sequence == "###"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("native", sorted(BEDROCK_NATIVE))
def test_stop_rows_for_responses_clients(bstack, stream, native):
    _, _, _, (status, reason), _ = STOP_ROWS[native]
    model = model_name()
    bstack.upstream.script(model, stop_script(native, stream))
    client = bstack.openai()
    if stream:  # responses.stream() wants response.completed: read the terminal event
        events = list(client.responses.create(model=model, input="Weather?", stream=True))
        response = events[-1].response
        assert events[-1].type == f"response.{status}"
    else:
        response = client.responses.create(model=model, input="Weather?")
    assert response.status == status
    got = response.incomplete_details.reason if response.incomplete_details else None
    assert got == reason


# --- the Responses endpoint -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_text_and_tool_call(bstack, stream):
    model = model_name()
    bstack.upstream.script(model, tool_answer([WEATHER], stream, "Checking."))
    client = bstack.openai()
    tools = [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]
    kwargs: dict[str, Any] = {"model": model, "input": "Weather?", "tools": tools}
    if stream:
        with client.responses.stream(**kwargs) as events:
            kinds = [event.type for event in events]
            response = events.get_final_response()
        assert kinds[-1] == "response.completed"
    else:
        response = client.responses.create(**kwargs)
    assert response.output_text == "Checking."
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("tu_w1", "weather", json.loads(WEATHER[2]))
    ]
    body = bstack.upstream.last(model).json
    assert body["messages"] == [{"role": "user", "content": [{"text": "Weather?"}]}]
    assert body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "weather"


# --- cut tool calls ---------------------------------------------------------------------------


def cut_call_script(stream: bool) -> Script:
    if stream:
        blocks = text_blocks("Let me check.")
        blocks += tool_blocks(1, "tu_cut", "weather", '{"city": "Zür', stop=False)
        return stream_script(stream_events(blocks, "max_tokens"))
    content = [
        {"text": "Let me check."},
        {"toolUse": {"toolUseId": "tu_cut", "name": "weather", "input": {}}},
    ]
    return Script(body=converse_body(content, "max_tokens"))


@pytest.mark.parametrize(("client", "stream"), MODES)
@pytest.mark.parametrize("policy", ["withhold", "pass"])
def test_a_call_cut_at_max_tokens_is_withheld_or_passed(bstack, client, stream, policy):
    seen = drive(bstack, client, stream, cut_call_script(stream), policy=policy)
    assert seen.error is None
    assert seen.text == "Let me check."
    assert seen.stop == ("length" if client == "openai" else "max_tokens")
    withheld = [{"id": "tu_cut", "name": "weather"}] if policy == "withhold" else []
    check_gateway(seen, "length", "max_tokens", True, withheld)
    if policy == "withhold":
        assert seen.tools == []
    else:
        assert [(t.id, t.name) for t in seen.tools] == [("tu_cut", "weather")]
        if client == "openai" and stream:
            assert seen.tools[0].raw == '{"city": "Zür'  # delivered as the upstream sent it


# --- broken streams ---------------------------------------------------------------------------


def partial_then(*tail: bytes, drop: bool = False) -> Script:
    """Text and the start of a tool call, then `tail` (or a connection dropped mid-message)."""
    blocks = text_blocks("Partial") + tool_blocks(1, WEATHER[0], WEATHER[1], WEATHER[2], False)
    events = stream_events(blocks)[: 1 + len(blocks)]
    chunks = [event_stream([event]) for event in events]
    if drop:
        nxt = event_stream([("contentBlockStop", {"contentBlockIndex": 1})])
        return Script(chunks=[*chunks, nxt[:9], nxt[9:]], drop_after=len(chunks) + 1)
    return Script(chunks=[*chunks, *tail])


def check_broken(bstack: BedrockStack, seen: Seen, client: str, native: str) -> None:
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
    frames = raw_stream(bstack, client, seen.model)
    check_error_ending(frames, client)
    ext = frames[-1].json["gateway"]
    assert ext["stop_reason"] == "error"
    assert ext["native_stop_reason"] == native
    assert ext["truncated"] is True
    assert ext["withheld_tool_calls"] == [{"id": WEATHER[0], "name": WEATHER[1]}]


def bad_crc() -> bytes:
    raw = bytearray(event_stream([("contentBlockStop", {"contentBlockIndex": 1})]))
    raw[-1] ^= 0xFF
    return bytes(raw)


BROKEN = [
    ("dropped-mid-message", partial_then(drop=True), "gateway:connection_lost"),
    ("ends-without-messageStop", partial_then(), "gateway:stream_truncated"),
    ("bad-crc", partial_then(bad_crc()), "gateway:protocol"),
    (
        "throttling-exception",
        partial_then(exception_message("throttlingException", "slow down")),
        "rate_limit_error",
    ),
    (
        "model-stream-error",
        partial_then(exception_message("modelStreamErrorException", "model failed")),
        "api_error",
    ),
    (
        "internal-server-exception",
        partial_then(exception_message("internalServerException", "oops")),
        "api_error",
    ),
]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("kind", "script", "native"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_stream_ends_with_the_clients_error_event(bstack, client, kind, script, native):
    seen = drive(bstack, client, True, script)
    check_broken(bstack, seen, client, native)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_exception_before_any_content_is_the_clients_rate_limit_error(bstack, client):
    script = Script(chunks=[exception_message("throttlingException", "Too many requests")])
    seen = drive(bstack, client, True, script)
    kind = openai.RateLimitError if client == "openai" else anthropic.RateLimitError
    assert isinstance(seen.error, kind), seen.error
    assert "Too many requests" in str(seen.error)


# --- upstream error replies -------------------------------------------------------------------

ERRORS = [
    (429, "ThrottlingException", openai.RateLimitError, anthropic.RateLimitError),
    (400, "ValidationException", openai.BadRequestError, anthropic.BadRequestError),
    (403, "AccessDeniedException", openai.PermissionDeniedError, anthropic.PermissionDeniedError),
    (404, "ResourceNotFoundException", openai.NotFoundError, anthropic.NotFoundError),
    (500, "InternalServerException", openai.InternalServerError, anthropic.InternalServerError),
    (503, "ServiceUnavailableException", openai.InternalServerError, anthropic.InternalServerError),
]


@pytest.mark.parametrize(("client", "stream"), MODES)
@pytest.mark.parametrize(
    ("status", "exception", "openai_error", "anthropic_error"), ERRORS, ids=[e[1] for e in ERRORS]
)
def test_an_upstream_error_reply_is_the_clients_error(
    bstack, client, stream, status, exception, openai_error, anthropic_error
):
    seen = drive(bstack, client, stream, error_reply(status, exception, "it failed"))
    kind = openai_error if client == "openai" else anthropic_error
    assert isinstance(seen.error, kind), seen.error
    assert seen.error.status_code == status
    assert "it failed" in str(seen.error)


def test_a_throttled_reply_names_its_type_for_each_client(bstack):
    seen = drive(bstack, "anthropic", False, error_reply(429, "ThrottlingException", "slow"))
    assert isinstance(seen.error, anthropic.RateLimitError)
    assert seen.error.response.json()["error"]["type"] == "rate_limit_error"
    seen = drive(bstack, "openai", False, error_reply(429, "ThrottlingException", "slow"))
    assert isinstance(seen.error, openai.RateLimitError)
    assert seen.error.response.json()["error"]["code"] == "rate_limit_error"


# --- usage --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_usage_with_cache_tokens_reaches_both_clients(bstack, stream):
    model = model_name()
    bstack.upstream.script(model, text_answer("ok", stream))
    client = bstack.openai()
    messages = [{"role": "user", "content": "hi"}]
    if stream:
        chunks = list(
            client.chat.completions.create(
                model=model, messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        usage = chunks[-1].usage
    else:
        usage = client.chat.completions.create(model=model, messages=messages).usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (21, 7)
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 6
    model = model_name()
    bstack.upstream.script(model, text_answer("ok", stream))
    anthropic_client = bstack.anthropic()
    if stream:
        with anthropic_client.messages.stream(
            model=model, max_tokens=10, messages=messages
        ) as events:
            message = events.get_final_message()
    else:
        message = anthropic_client.messages.create(model=model, max_tokens=10, messages=messages)
    got = message.usage
    assert (got.input_tokens, got.output_tokens) == (11, 7)
    assert (got.cache_read_input_tokens, got.cache_creation_input_tokens) == (6, 4)


# --- credentials --------------------------------------------------------------------------------


def test_temporary_credentials_send_the_session_token(bstack, monkeypatch, tmp_path):
    isolate_aws(monkeypatch, tmp_path, AWS_SESSION_TOKEN="session-token-SECRET-0004")
    upstream = BedrockUpstream(REGION, token="session-token-SECRET-0004")
    upstream_url = bstack.run(bstack._serve(upstream.app()))
    config = gateway_settings(upstream_url, "withhold", "sqlite:///:memory:")
    url = bstack.add_gateway("temporary", config)
    model = model_name()
    upstream.script(model, text_answer("ok", False))
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
    completion = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "ok"
    assert upstream.auth_failures == []
    assert upstream.last(model).headers["X-Amz-Security-Token"] == "session-token-SECRET-0004"


def test_no_credentials_is_a_bad_gateway_naming_the_chain(bstack, monkeypatch, tmp_path):
    isolate_aws(monkeypatch, tmp_path)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    config = gateway_settings(bstack.upstream_url, "withhold", "sqlite:///:memory:")
    url = bstack.add_gateway("no-credentials", config)
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(
            model=model_name(), messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 502
    assert "no AWS credentials" in str(caught.value)


def blocking_refresh(akid: str) -> dict[str, str]:
    """What botocore's refresh callback returns; it reads a file, as a real one (SSO cache,
    a credential process) would: blocking, so it must never run in the event loop."""
    with open(__file__, "rb") as f:
        f.read(10)
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    return {"access_key": akid, "secret_key": "s", "token": "t", "expiry_time": expiry}


def refreshable(expires_in: float, akid: str) -> RefreshableCredentials:
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + expires_in))
    return RefreshableCredentials.create_from_metadata(
        {"access_key": "AKIAOLD", "secret_key": "s", "token": "t", "expiry_time": expiry},
        lambda: blocking_refresh(akid),
        "test",
    )


def provider_against(upstream_url: str, credentials: Credentials) -> BedrockProvider:
    return BedrockProvider("bedrock", upstream_url, REGION, None, credentials=lambda: credentials)


async def send_once(provider: BedrockProvider, model: str) -> None:
    reply = await provider.send(
        ProviderRequest(body=b'{"messages": []}', stream=False, model=model)
    )
    await reply.read()
    reply.release()


def test_credentials_are_refreshed_off_the_event_loop(tmp_path):
    """A mandatory refresh (expiry within 10 minutes) is awaited in a worker thread; an advisory
    one (within 15) runs in the background while the current credentials still sign. The
    session's blockbuster fails any blocking call made in the loop."""
    upstream = BedrockUpstream(REGION)

    async def scenario() -> list[str]:
        from aiohttp import web

        runner = web.AppRunner(upstream.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        model = model_name()
        upstream.script(model, text_answer("ok", False))
        try:
            mandatory = provider_against(url, refreshable(60, "AKIAMANDATORY"))
            await send_once(mandatory, model)  # resolves, then must refresh before signing
            await send_once(mandatory, model)
            await mandatory.close()
            credentials = refreshable(20 * 60, "AKIAADVISORY")
            advisory = provider_against(url, credentials)
            await send_once(advisory, model)  # resolved: no refresh due yet
            credentials._advisory_refresh_timeout = 25 * 60  # now one is (not a mandatory one)
            await send_once(advisory, model)  # signs with the current ones, refreshes behind
            for _ in range(100):
                if advisory._refreshing is None:
                    break
                await asyncio.sleep(0.01)
            await send_once(advisory, model)
            await advisory.close()
        finally:
            await runner.cleanup()
        return upstream.akids

    akids = asyncio.run(scenario())
    assert akids[:2] == ["AKIAMANDATORY", "AKIAMANDATORY"]
    assert akids[2:] == ["AKIAOLD", "AKIAOLD", "AKIAADVISORY"]
    assert upstream.auth_failures == []


def test_a_whole_body_stop_sequence_reaches_the_anthropic_client(bstack):
    body = converse_body([{"text": "a b"}], "stop_sequence", stop_sequence="###")
    seen = drive(bstack, "anthropic", False, Script(body=body))
    assert (seen.stop, seen.stop_sequence) == ("stop_sequence", "###")
    assert orjson.loads(body)["stopReason"] == "stop_sequence"


# --- settings -----------------------------------------------------------------------------------


def test_the_region_is_required_and_makes_the_default_endpoint():
    from gateway.settings import ConfigError, parse_settings

    def settings(**provider: Any) -> Any:
        routes = [{"match": "*", "provider": "b"}]
        return parse_settings(
            {"providers": {"b": {"kind": "bedrock", **provider}}, "routes": routes}
        )

    got = settings(region="eu-central-1").providers["b"]
    assert got.base_url == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    assert settings(region="eu-central-1", base_url="http://h:1/").providers["b"].base_url == (
        "http://h:1"
    )
    with pytest.raises(ConfigError, match='kind "bedrock" requires region'):
        settings()
    with pytest.raises(ConfigError, match="region: must be a cloud region name"):
        settings(region="evil.example/x")


def test_the_startup_summary_says_how_a_keyless_provider_signs():
    from gateway.settings import parse_settings
    from gateway.startup import _describe_provider, _key_warnings

    config = {
        "providers": {"b": {"kind": "bedrock", "region": "eu-west-1", "api_key_env": "BR_KEY"}},
        "routes": [{"match": "*", "provider": "b"}],
    }
    settings = parse_settings(config)
    line = _describe_provider(settings.providers["b"], {})
    assert line.startswith("kind bedrock, host bedrock-runtime.eu-west-1.amazonaws.com")
    assert "SigV4" in line
    assert "SigV4" in next(iter(_key_warnings(settings, {})))
    assert "forwarded" not in line


def test_no_credential_reaches_the_logs_even_at_debug(bstack, monkeypatch, tmp_path, caplog):
    token = "session-token-SECRET-0005"
    isolate_aws(monkeypatch, tmp_path, AWS_SESSION_TOKEN=token)
    upstream = BedrockUpstream(REGION, bearer="bedrock-api-key-SECRET-0003", token=token)
    upstream_url = bstack.run(bstack._serve(upstream.app()))
    url = bstack.add_gateway(
        "logged", gateway_settings(upstream_url, "withhold", "sqlite:///:memory:")
    )
    caplog.set_level(logging.DEBUG)
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
    for prefix in ("br", "brk"):
        model = model_name(prefix)
        upstream.script(model, text_answer("ok", True))
        chunks = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"
    assert upstream.auth_failures == []
    signature = upstream.last(model_name_of(upstream, "br-")).headers["Authorization"][-64:]
    logged = caplog.text
    for secret in (SECRET, token, "bedrock-api-key-SECRET-0003", signature):
        assert secret not in logged


def model_name_of(upstream: BedrockUpstream, prefix: str) -> str:
    return next(model for model in upstream.received if model.startswith(prefix))


# --- the recorded streams through the gateway ---------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures" / "other"


def recorded(name: str) -> Script:
    """A recorded stream (decoded events, one a line) as the event-stream bytes Bedrock sends,
    cut into 7-byte chunks so messages straddle reads."""
    lines = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line]
    body = event_stream([next(iter(line.items())) for line in lines])
    return Script(chunks=[body[i : i + 7] for i in range(0, len(body), 7)])


def test_the_recorded_reasoning_stream_reaches_an_anthropic_client_with_its_signature(bstack):
    model = model_name()
    bstack.upstream.script(model, recorded("vercel_ai__amazon-bedrock-reasoning.chunks.jsonl"))
    with bstack.anthropic().messages.stream(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "r?"}]
    ) as events:
        message = events.get_final_message()
    assert [block.type for block in message.content] == ["thinking", "text"]
    assert message.content[0].thinking.startswith("Let me count the r's")
    assert message.content[0].signature.startswith("Ep0CCkgI")
    assert message.content[1].text.startswith("There are **3** r's")
    assert message.stop_reason == "end_turn"


@pytest.mark.parametrize("client", CLIENTS)
def test_the_recorded_tool_streams_reach_both_clients(bstack, client):
    seen = drive(
        bstack, client, True, recorded("vercel_ai__amazon-bedrock-tool-call.1.chunks.jsonl")
    )
    assert seen.error is None
    assert [(t.id, t.name, t.args) for t in seen.tools] == [
        ("tool-use-id", "test-tool", {"value": "Sparkle Day"})
    ]
    seen = drive(
        bstack, client, True, recorded("vercel_ai__amazon-bedrock-tool-no-args.chunks.jsonl")
    )
    assert seen.error is None
    assert seen.text == "I'll update the issue list for you."
    assert [(t.name, t.args) for t in seen.tools] == [("updateIssueList", {})]
    if client == "openai":
        assert seen.tools[0].raw == "{}"  # never "" (PROTOCOLS.md §g.5)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("policy", ["withhold", "pass"])
def test_a_cut_call_reaches_a_responses_client_withheld_or_passed(bstack, stream, policy):
    model = model_name()
    bstack.upstream.script(model, cut_call_script(stream))
    client = bstack.openai(policy)
    if stream:
        events = list(client.responses.create(model=model, input="Weather?", stream=True))
        assert events[-1].type == "response.incomplete"
        response = events[-1].response
    else:
        response = client.responses.create(model=model, input="Weather?")
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "Let me check."
    calls = [item for item in response.output if item.type == "function_call"]
    if policy == "withhold":
        assert calls == []
    else:
        assert [(c.call_id, c.name, c.status) for c in calls] == [
            ("tu_cut", "weather", "incomplete")
        ]
