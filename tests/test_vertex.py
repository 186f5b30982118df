"""`kind = "vertex"`: Claude models end to end, Gemini models at the transport.

A loopback token endpoint plays Google's OAuth server for a service account whose key the test
generates (google-auth signs the JWT assertion; the endpoint checks the signature), and a loopback
Vertex AI checks the bearer token and the path. Claude models are driven by the real `anthropic`
and `openai` SDKs and the Responses endpoint; the Gemini wire is not on this branch, so Gemini
models are checked on what reaches the upstream (URL, auth, body) by calling the provider.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.app import GATEWAY
from gateway.errors import InvalidRequest
from gateway.settings import ConfigError, parse_settings
from providers.base import Operation, ProviderRequest
from providers.google_credentials import AccessTokens
from providers.vertex import VertexProvider, publisher_of, region_base_url
from tests.conftest import Stack
from tests.scenarios import Answer, Tool, script_for
from tests.upstream import Script
from tests.vertex_upstream import TokenEndpoint, VertexUpstream

PROJECT, REGION = "proj-test", "us-east5"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
OPENAI_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TOOL = Tool("toolu_vx1", "get_weather", '{"city": "Zürich"}')


@pytest.fixture(scope="module")
def vertex(stack: Stack) -> VertexUpstream:
    upstream = VertexUpstream(TokenEndpoint())
    url = stack.run(stack._serve(upstream.app()))
    upstream.tokens.url = url
    upstream.url = url
    return upstream


class Gateways:
    """Gateways in front of the loopback Vertex, each with its own service account (`tag`)."""

    def __init__(self, stack: Stack, vertex: VertexUpstream, directory: Path) -> None:
        self.stack, self.vertex, self.directory = stack, vertex, directory
        self.names: list[str] = []

    def start(self, monkeypatch: pytest.MonkeyPatch, tag: str, **account: Any) -> str:
        """A gateway whose vertex provider loads `tag`'s key file through ADC. The provider
        reads `GOOGLE_APPLICATION_CREDENTIALS` on its first request, so the variable stays set
        for the rest of the caller's test."""
        key = self.vertex.tokens.account(tag, **account).key_file(self.directory)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
        provider = {
            "kind": "vertex",
            "project": PROJECT,
            "region": REGION,
            "base_url": self.vertex.url,
            "timeout": 5,
            "retry": {"attempts": 1},
        }
        changes = {
            "providers": {"vertex": provider},
            "routes": [{"match": "*", "provider": "vertex"}],
            "circuit": {"failures": 0},
        }
        name = f"vertex-{tag}"
        self.names.append(name)
        return self.stack.add_gateway(name, changes)

    def close(self) -> None:
        """Ends the providers' token keepers (the stack's apps live for the whole session)."""
        for name in self.names:
            provider = self.stack.apps[name][GATEWAY].providers["vertex"]
            self.stack.run(provider.close())


@pytest.fixture(scope="module")
def gateways(
    stack: Stack, vertex: VertexUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateways]:
    made = Gateways(stack, vertex, tmp_path_factory.mktemp("vertex-keys"))
    yield made
    made.close()


@pytest.fixture(scope="module")
def main_url(gateways: Gateways) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        url = gateways.start(monkeypatch, "main")
        # The key must be readable until the provider's first request: kept for the module.
        yield url


def anthropic_at(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-client-SECRET", max_retries=0)


def openai_at(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="sk-client-SECRET", max_retries=0)


def model_path(model: str, method: str) -> str:
    return f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models/{model}:{method}"


def check_sent(vertex: VertexUpstream, model: str, method: str) -> dict[str, Any]:
    """What every Claude request must look like upstream; returns the body it got."""
    got = vertex.last(model)
    assert got.path == model_path(model, method)
    auth = got.headers["authorization"]
    assert auth.startswith("Bearer ya29.test-") and vertex.tokens.valid(auth[7:])
    assert "x-api-key" not in got.headers
    assert "sk-client-SECRET" not in orjson.dumps(got.headers).decode()
    body = got.json
    assert "model" not in body
    assert body["anthropic_version"] == "vertex-2023-10-16"
    return body


@pytest.fixture
def claude(unique_model: Callable[[str], str]) -> str:
    return unique_model("claude-vx") + "@20250514"


# --- settings and URLs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "missing"),
    [({"region": REGION}, "project"), ({"project": PROJECT}, "region"), ({}, "project and region")],
)
def test_settings_name_the_missing_keys(keys, missing):
    config = {"providers": {"vx": {"kind": "vertex", **keys}}, "routes": []}
    with pytest.raises(ConfigError) as raised:
        parse_settings(config)
    assert f'providers.vx: kind "vertex" requires {missing}' in str(raised.value)


def test_region_endpoints_and_publishers():
    assert region_base_url("global") == "https://aiplatform.googleapis.com"
    assert region_base_url("us-east5") == "https://us-east5-aiplatform.googleapis.com"
    assert region_base_url("eu") == "https://aiplatform.eu.rep.googleapis.com"
    provider = VertexProvider("vx", "p", "global", api_key="k")
    assert provider.wire_of("claude-opus-4@20250514") == "anthropic"
    assert provider.wire_of("gemini-2.5-pro") == "gemini"
    root = "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers"

    def url(model: str, operation: Operation, stream: bool) -> str:
        publisher = publisher_of(model)
        return provider.url(publisher, provider.method(publisher, operation, stream), model)

    claude = "claude-opus-4@20250514"
    assert url(claude, Operation.GENERATE, False) == f"{root}/anthropic/models/{claude}:rawPredict"
    assert url(claude, Operation.GENERATE, True).endswith(f"/{claude}:streamRawPredict")
    count = url(claude, Operation.COUNT_TOKENS, False)
    assert count == f"{root}/anthropic/models/count-tokens:rawPredict"
    assert url("gemini-2.5-pro", Operation.GENERATE, True) == (
        f"{root}/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert url("gemini-2.5-pro", Operation.COUNT_TOKENS, False).endswith(":countTokens")
    # A client's model name stays one path segment.
    assert url("../x:y?z", Operation.GENERATE, False) == (
        f"{root}/google/models/..%2Fx%3Ay%3Fz:generateContent"
    )
    with pytest.raises(InvalidRequest, match="does not offer embed for google models"):
        url("gemini-embedding-001", Operation.EMBED, False)


# --- Claude models through the Anthropic SDK -------------------------------------------------


def test_anthropic_sdk_whole_text(main_url, vertex, claude):
    vertex.script(claude, script_for("anthropic", Answer(text="Hello from Vertex"), claude, False))
    message = anthropic_at(main_url).messages.create(
        model=claude, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    assert [b.text for b in message.content if b.type == "text"] == ["Hello from Vertex"]
    assert message.stop_reason == "end_turn"
    assert message.model_extra is not None and message.model_extra["gateway"]["truncated"] is False
    body = check_sent(vertex, claude, "rawPredict")
    assert body["max_tokens"] == 50 and body["messages"] == [{"role": "user", "content": "hi"}]
    got = vertex.last(claude).headers
    assert "anthropic-version" not in got


def test_anthropic_sdk_streamed_text_with_beta_header(main_url, vertex, claude):
    vertex.script(claude, script_for("anthropic", Answer(text="Streamed on Vertex"), claude, True))
    client = anthropic_at(main_url)
    with client.messages.stream(
        model=claude,
        max_tokens=50,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
    ) as events:
        message = events.get_final_message()
    assert [b.text for b in message.content if b.type == "text"] == ["Streamed on Vertex"]
    body = check_sent(vertex, claude, "streamRawPredict")
    assert body["stream"] is True
    assert vertex.last(claude).headers["anthropic-beta"] == "context-1m-2025-08-07"


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_tool_call(main_url, vertex, claude, stream):
    answer = Answer(text="Checking.", tools=[TOOL])
    vertex.script(claude, script_for("anthropic", answer, claude, stream))
    kwargs: dict[str, Any] = {
        "model": claude,
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "Weather in Zürich?"}],
        "tools": [WEATHER_TOOL],
    }
    client = anthropic_at(main_url)
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    assert message.stop_reason == "tool_use"
    (call,) = [b for b in message.content if b.type == "tool_use"]
    assert (call.id, call.name, call.input) == ("toolu_vx1", "get_weather", {"city": "Zürich"})
    body = check_sent(vertex, claude, "streamRawPredict" if stream else "rawPredict")
    assert body["tools"][0]["name"] == "get_weather"


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_cut_at_max_tokens_is_withheld(main_url, vertex, claude, stream):
    cut = Tool("toolu_cut", "get_weather", '{"city": "Zü')
    answer = Answer(text="Let me check.", tools=[cut], native_stop="max_tokens")
    vertex.script(claude, script_for("anthropic", answer, claude, stream))
    kwargs: dict[str, Any] = {
        "model": claude,
        "max_tokens": 20,
        "messages": [{"role": "user", "content": "Weather in Zürich?"}],
        "tools": [WEATHER_TOOL],
    }
    client = anthropic_at(main_url)
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
        assert message.model_extra is not None
        gateway = message.model_extra["gateway"]
        assert gateway["truncated"] is True
        assert gateway["withheld_tool_calls"] == [{"id": "toolu_cut", "name": "get_weather"}]
    assert message.stop_reason == "max_tokens"
    assert [b.type for b in message.content] == ["text"]
    check_sent(vertex, claude, "streamRawPredict" if stream else "rawPredict")


# --- Claude models through the OpenAI SDK and the Responses endpoint -------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_openai_sdk_is_translated_to_anthropic_on_vertex(main_url, vertex, claude, stream):
    answer = Answer(text="Checking.", tools=[TOOL])
    vertex.script(claude, script_for("anthropic", answer, claude, stream))
    kwargs: dict[str, Any] = {
        "model": claude,
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "Weather in Zürich?"}],
        "tools": [OPENAI_WEATHER_TOOL],
    }
    client = openai_at(main_url)
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kwargs))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices]
        calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
        assert finish[-1] == "tool_calls"
        assert calls[0].id == "toolu_vx1" and calls[0].function.name == "get_weather"
        arguments = "".join(t.function.arguments or "" for t in calls)
    else:
        completion = client.chat.completions.create(**kwargs)
        choice = completion.choices[0]
        text = choice.message.content or ""
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls or []
        assert call.id == "toolu_vx1" and call.function.name == "get_weather"
        arguments = call.function.arguments
    assert text == "Checking."
    assert orjson.loads(arguments) == {"city": "Zürich"}
    body = check_sent(vertex, claude, "streamRawPredict" if stream else "rawPredict")
    assert body["max_tokens"] == 200 and body["tools"][0]["name"] == "get_weather"


@pytest.mark.parametrize("stream", [False, True])
def test_responses_endpoint_on_vertex_claude(main_url, vertex, claude, stream):
    vertex.script(claude, script_for("anthropic", Answer(text="Via Responses"), claude, stream))
    client = openai_at(main_url)
    if stream:
        events = list(client.responses.create(model=claude, input="hi", stream=True))
        (done,) = [e for e in events if e.type == "response.completed"]
        response = done.response
    else:
        response = client.responses.create(model=claude, input="hi")
    assert response.status == "completed"
    assert response.output_text == "Via Responses"
    check_sent(vertex, claude, "streamRawPredict" if stream else "rawPredict")


# --- credentials -----------------------------------------------------------------------------


def test_a_token_about_to_expire_is_refreshed_before_the_next_request(
    gateways, vertex, claude, monkeypatch
):
    url = gateways.start(monkeypatch, "short", expires_in=4)
    account = vertex.tokens.accounts["short"]
    client = anthropic_at(url)
    vertex.script(claude, script_for("anthropic", Answer(text="one"), claude, False))
    client.messages.create(model=claude, max_tokens=5, messages=[{"role": "user", "content": "a"}])
    first = vertex.last(claude).headers["authorization"]
    assert first == f"Bearer {account.minted[0]}"
    # The keeper refreshes on its own, ahead of expiry: no request asks for it.
    deadline = time.monotonic() + 30
    while len(account.minted) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(account.minted) >= 2
    client.messages.create(model=claude, max_tokens=5, messages=[{"role": "user", "content": "b"}])
    second = vertex.last(claude).headers["authorization"]
    assert second != first and second[7:] in account.minted[1:]
    assert not vertex.tokens.bad_grants  # every assertion was signed with the account's key


def test_a_failing_token_endpoint_is_a_clear_error_in_each_format(
    gateways, vertex, claude, monkeypatch, caplog
):
    url = gateways.start(monkeypatch, "refused", fail_status=400)
    vertex.script(claude, Script(body=b"{}"))
    with pytest.raises(anthropic.APIStatusError) as raised:
        anthropic_at(url).messages.create(
            model=claude, max_tokens=5, messages=[{"role": "user", "content": "a"}]
        )
    assert raised.value.status_code == 502
    error = raised.value.body["error"]
    assert error["type"] == "api_error"
    assert "could not obtain a Google access token (RefreshError)" in error["message"]
    with pytest.raises(openai.APIStatusError) as failed:
        openai_at(url).chat.completions.create(
            model=claude, messages=[{"role": "user", "content": "a"}], stream=True
        )
    assert failed.value.status_code == 502
    assert "could not obtain a Google access token" in failed.value.body["message"]
    assert vertex.received[claude] == []  # the upstream was never asked
    assert vertex.tokens.accounts["refused"].refused >= 1
    assert caplog.records and "SECRET-DESCRIPTION" not in caplog.text
    assert not [r for r in caplog.records if "SECRET-DESCRIPTION" in str(vars(r))]
    # The keeper retries on its own; once the endpoint grants again, requests go through.
    account = vertex.tokens.accounts["refused"]
    account.fail_status = None
    deadline = time.monotonic() + 30
    while not account.minted and time.monotonic() < deadline:
        time.sleep(0.05)
    vertex.script(claude, script_for("anthropic", Answer(text="back"), claude, False))
    message = anthropic_at(url).messages.create(
        model=claude, max_tokens=5, messages=[{"role": "user", "content": "a"}]
    )
    assert [b.text for b in message.content if b.type == "text"] == ["back"]


# --- Gemini models: the request side (the Gemini wire decodes the answer) ---------------------


@pytest.mark.parametrize(
    ("stream", "method"),
    [(True, "streamGenerateContent?alt=sse"), (False, "generateContent")],
)
def test_a_gemini_request_goes_to_the_google_publisher(
    stack, vertex, unique_model, monkeypatch, tmp_path, stream, method
):
    key = vertex.tokens.account("gemini").key_file(tmp_path)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    model = unique_model("gemini-vx")
    error = {"error": {"code": 400, "message": "scripted", "status": "INVALID_ARGUMENT"}}
    vertex.script(model, Script(status=400, body=orjson.dumps(error)))
    body = b'{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"model":"kept as sent"}'
    provider = VertexProvider("vx", PROJECT, REGION, vertex.url, tokens=AccessTokens("vx"))

    async def send() -> int:
        try:
            reply = await provider.send(ProviderRequest(body, stream, model))
            await reply.read()
            reply.release()
            return reply.status
        finally:
            await provider.close()

    assert stack.run(send()) == 400
    got = vertex.last(model)
    path = f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/google/models/{model}:{method}"
    assert got.path == path
    assert got.body == body  # passed through as the Gemini translator built it
    assert got.headers["authorization"] == f"Bearer {vertex.tokens.accounts['gemini'].minted[-1]}"
    assert "anthropic-beta" not in got.headers


def test_an_api_key_is_sent_as_x_goog_api_key(stack, vertex, unique_model):
    model = unique_model("gemini-vx")
    vertex.script(model, Script(status=400, body=b"{}"))
    provider = VertexProvider("vx", PROJECT, REGION, vertex.url, api_key="AIza-SECRET")
    headers = {"authorization": "Bearer client-own", "anthropic-beta": "x"}

    async def send() -> None:
        try:
            reply = await provider.send(ProviderRequest(b"{}", False, model, headers=headers))
            reply.release()
        finally:
            await provider.close()

    stack.run(send())
    got = vertex.last(model).headers
    assert got["x-goog-api-key"] == "AIza-SECRET"
    assert "authorization" not in got  # neither a token nor the client's own credential


def test_count_tokens_for_claude_goes_to_the_shared_endpoint(
    stack, vertex, claude, monkeypatch, tmp_path
):
    key = vertex.tokens.account("count").key_file(tmp_path)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    vertex.script("count-tokens", Script(body=b'{"input_tokens": 12}'))
    body = orjson.dumps({"model": claude, "messages": [{"role": "user", "content": "hi"}]})
    provider = VertexProvider("vx", PROJECT, REGION, vertex.url)
    request = ProviderRequest(body, False, claude, Operation.COUNT_TOKENS)

    async def send() -> bytes:
        try:
            reply = await provider.send(request)
            answer = await reply.read()
            reply.release()
            return answer
        finally:
            await provider.close()

    assert orjson.loads(stack.run(send())) == {"input_tokens": 12}
    got = vertex.last("count-tokens")
    assert got.path == model_path("count-tokens", "rawPredict")
    # One endpoint for every Claude model: the model stays in the body.
    assert got.json == {
        "model": claude,
        "messages": [{"role": "user", "content": "hi"}],
        "anthropic_version": "vertex-2023-10-16",
    }


def test_claude_count_tokens_is_vertex_own_count(main_url, vertex, claude):
    """`/v1/messages/count_tokens` for a Claude model goes to Vertex's shared
    `count-tokens:rawPredict`, with the model in the body, answered by Vertex's count."""
    vertex.script("count-tokens", Script(body=orjson.dumps({"input_tokens": 321})))
    raw = anthropic_at(main_url).messages.with_raw_response.count_tokens(
        model=claude, messages=[{"role": "user", "content": "count me"}]
    )
    assert raw.parse().input_tokens == 321
    assert orjson.loads(raw.http_response.content)["gateway"]["estimated"] is False
    got = vertex.last("count-tokens")
    assert got.path == model_path("count-tokens", "rawPredict")
    assert got.json["model"] == claude
    assert got.json["anthropic_version"] == "vertex-2023-10-16"
    assert got.headers["authorization"].startswith("Bearer ya29.test-")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_gemini_model_answers_through_the_gateway(main_url, vertex, unique_model, stream):
    """A Gemini model on Vertex, end to end: the OpenAI SDK's request translated to the Gemini
    wire, sent to the google publisher with the ADC token, and its answer (SSE or whole)
    decoded, a MAX_TOKENS stop arriving as the client's `length`."""
    model = unique_model("gemini-vx")
    usage = {"promptTokenCount": 4, "candidatesTokenCount": 2, "totalTokenCount": 6}
    parts = {"role": "model", "parts": [{"text": "Hel"}]}
    if stream:
        chunks = [
            {"candidates": [{"content": parts}], "responseId": "r1"},
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": "lo"}]},
                        "finishReason": "MAX_TOKENS",
                    }
                ],
                "usageMetadata": usage,
                "responseId": "r1",
            },
        ]
        script = Script(chunks=[b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks])
    else:
        whole = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "Hello"}]},
                    "finishReason": "MAX_TOKENS",
                }
            ],
            "usageMetadata": usage,
            "responseId": "r1",
        }
        script = Script(body=orjson.dumps(whole))
    vertex.script(model, script)
    client = openai_at(main_url)
    if stream:
        text, finish = "", None
        for chunk in client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
    else:
        answer = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}]
        )
        text, finish = answer.choices[0].message.content, answer.choices[0].finish_reason
    assert (text, finish) == ("Hello", "length")
    got = vertex.last(model)
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert (
        got.path
        == f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/google/models/{model}:{method}"
    )
    assert got.json["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert got.headers["authorization"].startswith("Bearer ya29.test-")


def test_the_first_token_is_fetched_at_startup(gateways, vertex, monkeypatch, claude):
    """The provider starts its token keeper when the server starts: the token endpoint is
    asked before any request, and the first request goes out with that token."""
    url = gateways.start(monkeypatch, "eager")
    account = vertex.tokens.accounts["eager"]
    deadline = time.monotonic() + 10
    while not account.minted and time.monotonic() < deadline:
        time.sleep(0.02)
    assert account.minted, "no token was fetched before the first request"
    vertex.script(claude, script_for("anthropic", Answer(text="early"), claude, False))
    answer = anthropic_at(url).messages.create(
        model=claude, max_tokens=20, messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.content[0].text == "early"
    assert vertex.last(claude).headers["authorization"] == f"Bearer {account.minted[0]}"
    assert len(account.minted) == 1
