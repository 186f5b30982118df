"""Azure OpenAI behind the gateway: its URLs, its credentials, its content filter.

Real HTTP all the way: the openai SDK (Chat Completions and Responses) and the anthropic SDK
talk to a gateway built with `build_app`, whose `azure_openai` providers talk to a loopback
Azure resource (tests/azure_upstream.py) that serves the deployment path (with `api-version`)
and the v1 path, checks `api-key` or the Entra ID bearer, and answers with Azure's bytes
(`prompt_filter_results`, `content_filter_results`; the recorded stream
`vercel_ai__azure-model-router` for text).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.events import StopReason
from gateway.settings import ConfigError, parse_settings
from tests.azure_upstream import (
    API_VERSION,
    AZURE_KEY,
    ENTRA_ENV_TOKEN,
    ENTRA_TOKEN,
    RATE_LIMITED,
    AzureStack,
    Script,
    body,
    chunk,
    filtered,
    filtered_prompt_body,
    prompt_filter_chunk,
    sse,
    usage_chunk,
)
from tests.fixtures_util import chunked, load_json, replay, stream_body
from tests.responses_upstream import response as responses_body
from tests.responses_upstream import responses_sse, stream_events, text_item

ROUTER_STREAM = "openai_chat/vercel_ai__azure-model-router.chunks.jsonl"
BASIC_BODY = "openai_chat/envoy__azure-chat-basic.response.json"
CLIENT_KEY = "sk-client-own-0006"
MESSAGES = [{"role": "user", "content": "What is the capital of Denmark?"}]
WEATHER_TOOL = {"type": "object", "properties": {"city": {"type": "string"}}}


@pytest.fixture(scope="module")
def azure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureStack]:
    stack = AzureStack(Path(tmp_path_factory.mktemp("azure")))
    stack.start()
    yield stack
    stack.stop()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def oai(stack: AzureStack, key: str = "sk-client") -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key=key, max_retries=0)


def ant(stack: AzureStack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.url, api_key="sk-client", max_retries=0)


def openai_text(stack: AzureStack, model: str, stream: bool) -> tuple[str, str | None, Any]:
    """The text, finish_reason and gateway object an openai client sees."""
    client = oai(stack)
    if not stream:
        done = client.chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
        return done.choices[0].message.content or "", done.choices[0].finish_reason, done.gateway  # type: ignore[attr-defined]
    text, finish, ext = "", None, None
    events = client.chat.completions.create(
        model=model,
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    for event in events:
        extra = getattr(event, "gateway", None)
        ext = extra if extra is not None else ext
        for choice in event.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish, ext


def anthropic_text(stack: AzureStack, model: str, stream: bool) -> tuple[str, str | None]:
    client = ant(stack)
    kwargs: dict[str, Any] = {"model": model, "max_tokens": 64, "messages": MESSAGES}
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    text = "".join(block.text for block in message.content if block.type == "text")
    return text, message.stop_reason


def received(stack: AzureStack, model: str) -> Any:
    got = stack.upstream.received[model]
    assert len(got) == 1, got
    return got[0]


# --- URLs and credentials -----------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_deployment_path_with_api_version_and_api_key(azure: AzureStack, stream: bool) -> None:
    model = name("az")
    if stream:
        script = Script(chunks=[stream_body(ROUTER_STREAM)])
    else:
        script = Script(body=orjson.dumps(load_json(BASIC_BODY)))
    azure.upstream.script(model, script)
    text, finish, ext = openai_text(azure, model, stream)
    seen = received(azure, model)
    assert seen.path == f"/openai/deployments/{model}/chat/completions"
    assert seen.query == {"api-version": API_VERSION}
    assert seen.headers == {"api-key": AZURE_KEY}  # the client's own key never goes upstream
    expected = "Capital of Denmark." if stream else load_json(BASIC_BODY)["choices"][0]
    if stream:
        assert text == expected
    else:
        assert text == expected["message"]["content"]
    assert finish == "stop"
    assert ext["stop_reason"] == "stop" and ext["truncated"] is False
    record = azure.record(model)
    assert (record["provider"], record["upstream_model"]) == ("azure", model)
    assert record["stop_reason"] == "stop"
    assert AZURE_KEY not in record["_row"]
    if stream:
        assert (record["input_tokens"], record["output_tokens"]) == (15, 78)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_v1_path_puts_the_deployment_in_the_body(azure: AzureStack, stream: bool) -> None:
    model = name("azv1")
    script = Script(chunks=[stream_body(ROUTER_STREAM)]) if stream else Script(body=_text_body())
    azure.upstream.script(model, script)
    text, finish, _ = openai_text(azure, model, stream)
    seen = received(azure, model)
    assert seen.path == "/openai/v1/chat/completions"
    assert seen.query == {}  # no api-version on the v1 API
    assert seen.body["model"] == model
    assert seen.headers == {"api-key": AZURE_KEY}  # from api_key_env
    assert text == ("Capital of Denmark." if stream else "Copenhagen.")
    assert finish == "stop"


def test_entra_token_file_is_sent_as_bearer_and_reread_when_it_changes(
    azure: AzureStack,
) -> None:
    model = name("aze")
    azure.upstream.script(model, Script(body=_text_body()))
    text, _, _ = openai_text(azure, model, False)
    assert text == "Copenhagen."
    assert azure.upstream.received[model][-1].headers == {"authorization": f"Bearer {ENTRA_TOKEN}"}
    # An outside refresher writes the next token; the gateway picks it up off the request path.
    rotated = "entra-token-SECRET-rotated-0007"
    azure.upstream.tokens.add(rotated)
    azure.token_file.write_text(rotated + "\n")
    os.utime(azure.token_file, ns=(time.time_ns(), time.time_ns() + 10**9))
    deadline = time.monotonic() + 10
    while azure.upstream.received[model][-1].headers != {"authorization": f"Bearer {rotated}"}:
        assert time.monotonic() < deadline, "the new token was never sent"
        time.sleep(0.06)
        openai_text(azure, model, False)
    azure.token_file.write_text(ENTRA_TOKEN + "\n")
    rows = azure.records(model)
    assert rows and not any(ENTRA_TOKEN in row or rotated in row for row in rows)


def test_entra_token_from_an_environment_variable(azure: AzureStack) -> None:
    model = name("azenv")
    azure.upstream.script(model, Script(body=_text_body()))
    assert openai_text(azure, model, False)[0] == "Copenhagen."
    assert received(azure, model).headers == {"authorization": f"Bearer {ENTRA_ENV_TOKEN}"}


def test_without_a_key_the_clients_own_goes_upstream_as_api_key(azure: AzureStack) -> None:
    model = name("azf")
    azure.upstream.script(model, Script(body=_text_body()))
    azure.upstream.keys.add(CLIENT_KEY)
    done = oai(azure, CLIENT_KEY).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    assert done.choices[0].message.content == "Copenhagen."
    assert received(azure, model).headers == {"api-key": CLIENT_KEY}


def test_a_wrong_credential_is_azures_401_in_the_clients_format(azure: AzureStack) -> None:
    model = name("azf")
    azure.upstream.script(model, Script(body=_text_body()))
    with pytest.raises(openai.AuthenticationError) as caught:
        oai(azure, "sk-not-azure").chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    assert caught.value.status_code == 401


# --- text and tool calls through every client ---------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_client_is_translated(azure: AzureStack, stream: bool) -> None:
    model = name("az")
    script = Script(chunks=[stream_body(ROUTER_STREAM)]) if stream else Script(body=_text_body())
    azure.upstream.script(model, script)
    text, stop = anthropic_text(azure, model, stream)
    assert (text, stop) == ("Capital of Denmark." if stream else "Copenhagen.", "end_turn")
    sent = received(azure, model).body
    assert sent["messages"] == MESSAGES and sent["max_completion_tokens"] == 64


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_client_on_an_azure_chat_deployment(azure: AzureStack, stream: bool) -> None:
    model = name("az")
    script = Script(chunks=[stream_body(ROUTER_STREAM)]) if stream else Script(body=_text_body())
    azure.upstream.script(model, script)
    client = oai(azure)
    if stream:
        with client.responses.stream(model=model, input="Capital of Denmark?") as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(model=model, input="Capital of Denmark?")
    assert response.status == "completed"
    assert response.output_text == ("Capital of Denmark." if stream else "Copenhagen.")
    assert received(azure, model).path == f"/openai/deployments/{model}/chat/completions"


def _tool_chunks() -> list[bytes]:
    call = {
        "index": 0,
        "id": "call_az_1",
        "type": "function",
        "function": {"name": "weather", "arguments": ""},
    }
    return sse(
        [
            prompt_filter_chunk(),
            chunk({"role": "assistant", "content": None, "tool_calls": [call]}, filters={}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            chunk({}, "tool_calls", filters={}),
            usage_chunk(),
        ]
    )


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_a_streamed_tool_call(azure: AzureStack, client: str) -> None:
    model = name("az")
    azure.upstream.script(model, Script(chunks=_tool_chunks()))
    if client == "openai":
        tools = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER_TOOL}}]
        stream = oai(azure).chat.completions.create(
            model=model,
            messages=MESSAGES,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            stream=True,
        )
        calls: dict[int, list[str]] = {}
        finish = None
        for event in stream:
            for choice in event.choices:
                finish = choice.finish_reason or finish
                for call in choice.delta.tool_calls or ():
                    entry = calls.setdefault(call.index, ["", "", ""])
                    entry[0] = call.id or entry[0]
                    entry[1] = (call.function and call.function.name) or entry[1]
                    entry[2] += (call.function and call.function.arguments) or ""
        assert calls == {0: ["call_az_1", "weather", '{"city": "Paris"}']}
        assert finish == "tool_calls"
    else:
        kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": 64,
            "messages": MESSAGES,
            "tools": [{"name": "weather", "input_schema": WEATHER_TOOL}],
        }
        with ant(azure).messages.stream(**kwargs) as events:
            message = events.get_final_message()
        uses = [b for b in message.content if b.type == "tool_use"]
        assert [(u.id, u.name, u.input) for u in uses] == [
            ("call_az_1", "weather", {"city": "Paris"})
        ]
        assert message.stop_reason == "tool_use"
    record = azure.record(model)
    assert (record["stop_reason"], record["tool_calls"]) == ("tool_calls", 1)


# --- the content filter -------------------------------------------------------------------------

PARTIAL = "Here is the first step of the plan"


def _filtered_script(stream: bool) -> Script:
    results = filtered(violence="medium", hate="low")
    if not stream:
        return Script(body=body({"content": PARTIAL}, "content_filter", results))
    return Script(
        chunks=sse(
            [
                prompt_filter_chunk(),
                chunk({"role": "assistant", "content": ""}, filters={}),
                chunk({"content": PARTIAL}),
                chunk({}, "content_filter", results),
                usage_chunk(),
            ]
        )
    )


CLIENTS = [
    pytest.param(client, stream, id=f"{client}-{'stream' if stream else 'whole'}")
    for client in ("openai", "anthropic", "responses")
    for stream in (False, True)
]


@pytest.mark.parametrize(("client", "stream"), CLIENTS)
def test_a_filtered_completion_is_a_content_filter_stop_with_its_categories_recorded(
    azure: AzureStack, client: str, stream: bool
) -> None:
    model = name("az")
    azure.upstream.script(model, _filtered_script(stream))
    if client == "openai":
        text, finish, ext = openai_text(azure, model, stream)
        assert (text, finish) == (PARTIAL, "content_filter")
        assert ext["stop_reason"] == "content_filter"
        assert ext["native_stop_reason"] == "content_filter"
    elif client == "anthropic":
        text, stop = anthropic_text(azure, model, stream)
        assert (text, stop) == (PARTIAL, "refusal")
    else:
        responses = oai(azure).responses
        if stream:
            terminal = [
                event.response
                for event in responses.create(model=model, input="plan it", stream=True)
                if event.type in ("response.completed", "response.incomplete")
            ]
            assert len(terminal) == 1
            response = terminal[0]
        else:
            response = responses.create(model=model, input="plan it")
        assert response.status == "incomplete"
        assert response.incomplete_details is not None
        assert response.incomplete_details.reason == "content_filter"
    record = azure.record(model)
    assert (record["stop_reason"], record["native_stop_reason"]) == (
        "content_filter",
        "content_filter",
    )
    answered = record["attempts"][-1]
    assert answered["outcome"] == "answered"
    assert answered["stop_details"] == {"content_filter": {"violence": "medium", "hate": "low"}}
    assert PARTIAL not in record["_row"]  # categories, never the text


def test_the_filter_categories_survive_every_split_of_the_stream() -> None:
    chunks = _filtered_script(True).chunks
    assert chunks is not None
    raw = b"".join(chunks)
    expected = {"content_filter": {"violence": "medium", "hate": "low"}}
    for point in range(len(raw) + 1):
        resp = replay(raw, "openai", chunked(raw, [point])).response
        assert (resp.stop_reason, resp.stop_details, resp.text) == (
            StopReason.CONTENT_FILTER,
            expected,
            PARTIAL,
        ), point
        assert resp.complete and resp.terminator_seen


def test_a_filtered_prompt_on_a_streamed_request(azure: AzureStack) -> None:
    model = name("az")
    azure.upstream.script(model, Script(status=400, body=filtered_prompt_body(jailbreak="high")))
    with pytest.raises(openai.BadRequestError) as caught:
        oai(azure).chat.completions.create(model=model, messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    assert caught.value.code == "content_filter"
    record = azure.record(model)
    assert record["attempts"][-1]["error_details"] == {"content_filter": {"jailbreak": "high"}}


@pytest.mark.parametrize("client", ["openai", "anthropic", "responses"])
def test_a_filtered_prompt_is_a_400_in_the_clients_format(azure: AzureStack, client: str) -> None:
    model = name("az")
    azure.upstream.script(
        model, Script(status=400, body=filtered_prompt_body(violence="high", sexual="medium"))
    )
    if client == "openai":
        with pytest.raises(openai.BadRequestError) as caught:
            oai(azure).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
        error = caught.value.body
        assert isinstance(error, dict)
        assert error["code"] == "content_filter"
        assert "content management policy" in error["message"]
    elif client == "anthropic":
        with pytest.raises(anthropic.BadRequestError) as caught_a:
            ant(azure).messages.create(model=model, max_tokens=64, messages=MESSAGES)  # type: ignore[arg-type]
        payload = caught_a.value.body
        assert isinstance(payload, dict)
        assert payload["type"] == "error"
        assert payload["error"]["type"] == "invalid_request_error"
        assert "content management policy" in payload["error"]["message"]
    else:
        with pytest.raises(openai.BadRequestError) as caught_r:
            oai(azure).responses.create(model=model, input="plan it")
        assert caught_r.value.status_code == 400
    record = azure.record(model)
    assert record["http_status"] == 400
    failed = record["attempts"][-1]
    assert failed["status"] == 400
    assert failed["error_details"] == {"content_filter": {"violence": "high", "sexual": "medium"}}
    assert "content management policy" not in record["_row"]


@pytest.mark.parametrize("client", ["openai", "anthropic", "responses"])
def test_a_429_keeps_its_retry_after(azure: AzureStack, client: str) -> None:
    model = name("az")
    azure.upstream.script(
        model, Script(status=429, body=RATE_LIMITED, headers={"retry-after": "7"})
    )
    error: openai.RateLimitError | anthropic.RateLimitError
    with pytest.raises((openai.RateLimitError, anthropic.RateLimitError)) as caught:
        if client == "openai":
            oai(azure).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
        elif client == "anthropic":
            ant(azure).messages.create(model=model, max_tokens=64, messages=MESSAGES)  # type: ignore[arg-type]
        else:
            oai(azure).responses.create(model=model, input="hi")
    error = caught.value  # type: ignore[assignment]
    assert error.status_code == 429
    assert error.response.headers["retry-after"] == "7"
    assert azure.record(model)["http_status"] == 429


# --- the Responses kind -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "path", "query"),
    [
        ("azr", "/openai/v1/responses", {}),
        ("azrd", "/openai/responses", {"api-version": "2025-04-01-preview"}),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_azure_responses_kind(
    azure: AzureStack, prefix: str, path: str, query: dict[str, str], stream: bool
) -> None:
    model = name(prefix)
    items = [text_item("Copenhagen.")]
    if stream:
        script = Script(chunks=responses_sse(stream_events(items)))
    else:
        script = Script(body=orjson.dumps(responses_body(items)))
    azure.upstream.script(model, script)
    text, finish, _ = openai_text(azure, model, stream)
    assert (text, finish) == ("Copenhagen.", "stop")
    seen = received(azure, model)
    assert (seen.path, seen.query, seen.body["model"]) == (path, query, model)
    assert seen.headers == {"api-key": AZURE_KEY}


# --- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({}, 'kind "azure_openai" requires base_url and api_version'),
        ({"base_url": "https://r.openai.azure.com"}, "requires api_version"),
        (
            {
                "base_url": "https://r.openai.azure.com",
                "api_version": "v1",
                "api_key": "k",
                "entra": {"token_env": "T"},
            },
            "give api_key / api_key_env or entra, not both",
        ),
        (
            {"base_url": "https://r.openai.azure.com", "api_version": "v1", "entra": {}},
            "give token_env or token_file",
        ),
    ],
)
def test_settings_say_what_azure_needs(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings({"providers": {"az": {"kind": "azure_openai", **table}}})
    assert message in str(caught.value)


def test_entra_is_refused_on_other_kinds() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings({"providers": {"o": {"kind": "openai", "entra": {"token_env": "T"}}}})
    assert 'entra: kind "openai" takes none' in str(caught.value)


def _text_body() -> bytes:
    return body({"content": "Copenhagen."}, "stop")


@pytest.mark.parametrize(
    ("prefix", "path"),
    [
        ("az", "/openai/deployments/{model}/embeddings"),
        ("azv1", "/openai/v1/embeddings"),
        ("azr", "/openai/v1/embeddings"),
    ],
)
def test_embeddings_on_both_paths(azure: AzureStack, prefix: str, path: str) -> None:
    """`/v1/embeddings` goes to the deployment's embeddings (with api-version) or the v1 API's,
    with the resource's key, and the answer comes back unchanged."""
    model = name(prefix)
    answer = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -0.25]}],
        "model": model,
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
    azure.upstream.script(model, Script(body=orjson.dumps(answer)))
    result = oai(azure).embeddings.create(model=model, input="hi", encoding_format="float")
    assert result.data[0].embedding == [0.5, -0.25]
    seen = received(azure, model)
    assert seen.path == path.format(model=model)
    assert seen.headers == {"api-key": AZURE_KEY}
    assert ("api-version" in seen.query) == (prefix == "az")
