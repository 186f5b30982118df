"""Every native stop of Azure OpenAI, as each client format sees it, streamed and not; and the
loopback Azure upstream as openai's `AzureOpenAI` client reads it.

Azure's `finish_reason` is OpenAI's (`stop`, `length`, `content_filter`, `tool_calls`, and the
deprecated `function_call`), the choices carrying `content_filter_results` and the stream opening
with a `prompt_filter_results` chunk; a prompt its filter refuses is a 400 `content_filter` error
(tests/test_azure_openai.py checks that one in every client format). The gateway has no
Azure-shaped surface of its own, so `AzureOpenAI` validates the loopback upstream.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.app import build_app
from gateway.settings import parse_settings
from tests.azure_upstream import (
    API_VERSION,
    AZURE_KEY,
    AzureUpstream,
    Script,
    body,
    chunk,
    filtered,
    filtered_prompt_body,
    prompt_filter_chunk,
    sse,
    usage_chunk,
)
from tests.served import LoopServers
from tests.test_native_stops_clients import CLIENTS, STREAMED, check, expected, seen

MEANING = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}
# An OpenAI client asked with `functions` reads the legacy `function_call` finish beside its
# `message.function_call` (a stream's deltas as `delta.function_call`), as OpenAI and Azure send
# them: the same-format relay keeps both.
CASES = [(native, client) for native in MEANING for client in CLIENTS]
CALL = {
    "id": "call_az_stops",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Bern"}'},
}
FUNCTION = {"name": "get_weather", "arguments": '{"city": "Bern"}'}


def message(native: str) -> dict[str, Any]:
    if native == "tool_calls":
        return {"content": None, "tool_calls": [CALL]}
    if native == "function_call":
        return {"content": None, "function_call": FUNCTION}
    return {"content": "ok" if native != "content_filter" else "partial"}


def answer(native: str, stream: bool) -> Script:
    filters = filtered(violence="high") if native == "content_filter" else None
    if not stream:
        return Script(body=body(message(native), native, filters))
    delta = {"role": "assistant", **message(native)}
    if native == "tool_calls":
        delta["tool_calls"] = [{"index": 0, **CALL}]
    chunks = [prompt_filter_chunk(), chunk(delta), chunk({}, native, filters), usage_chunk()]
    return Script(chunks=sse(chunks))


class StopsStack(LoopServers):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.db = directory / "audit.db"
        self.upstream = AzureUpstream()
        self.upstream_url = ""
        self.url = ""

    async def _start(self) -> None:
        self.upstream_url = await self._serve(self.upstream.app())
        provider = {
            "kind": "azure_openai",
            "base_url": self.upstream_url,
            "api_version": API_VERSION,
            "api_key": AZURE_KEY,
            "timeout": 5,
            "retry": {"attempts": 1},
        }
        config = {
            "providers": {"azure": provider},
            "routes": [{"match": "az-*", "provider": "azure"}],
            "audit": {"store": f"sqlite:///{self.db}"},
            "circuit": {"failures": 0},
        }
        self.url = await self._serve(build_app(parse_settings(config, env={}), env={}))


@pytest.fixture(scope="module")
def stops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StopsStack]:
    stack = StopsStack(tmp_path_factory.mktemp("azure-stops"))
    stack.start()
    yield stack
    stack.stop()


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
@pytest.mark.parametrize(("native", "client"), CASES)
def test_each_value_as_each_client_sees_it(
    stops: StopsStack, native: str, client: str, stream: bool
) -> None:
    model = f"az-{uuid.uuid4().hex[:12]}"
    stops.upstream.script(model, answer(native, stream))
    got = seen(client, stops.url, model, stream)
    if client == "openai":  # a same-format relay: Azure's own value, the standard one
        assert got.stop == native, got
        got = dataclasses.replace(got, stop=expected(client, MEANING[native]))
    check(client, got, MEANING[native], native, stops.db, model)


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
def test_a_legacy_function_call_reaches_an_openai_client_in_its_own_shape(
    stops: StopsStack, stream: bool
) -> None:
    """A client that asked with `functions` reads `message.function_call` (a stream's
    `delta.function_call`) and the `function_call` finish, never a `tool_calls` it did not ask
    for."""
    model = f"az-{uuid.uuid4().hex[:12]}"
    stops.upstream.script(model, answer("function_call", stream))
    client = openai.OpenAI(base_url=stops.url + "/v1", api_key="sk-client", max_retries=0)
    messages: Any = [{"role": "user", "content": "weather in Bern?"}]
    functions: Any = [{"name": "get_weather", "parameters": {"type": "object"}}]
    if not stream:
        whole = client.chat.completions.create(model=model, messages=messages, functions=functions)
        choice = whole.choices[0]
        assert choice.finish_reason == "function_call"
        assert choice.message.tool_calls is None
        assert choice.message.function_call is not None
        assert choice.message.function_call.name == "get_weather"
        assert choice.message.function_call.arguments == FUNCTION["arguments"]
        return
    chunks = list(
        client.chat.completions.create(
            model=model, messages=messages, functions=functions, stream=True
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert not any(d.tool_calls for d in deltas)
    legacy = [d.function_call for d in deltas if d.function_call]
    assert [f.name for f in legacy if f.name] == ["get_weather"]
    assert "".join(f.arguments or "" for f in legacy) == FUNCTION["arguments"]
    (finish,) = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == "function_call"


# --- the loopback upstream as AzureOpenAI reads it -----------------------------------------------


def azure_client(stops: StopsStack) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(
        azure_endpoint=stops.upstream_url,
        api_key=AZURE_KEY,
        api_version=API_VERSION,
        max_retries=0,
    )


@pytest.mark.parametrize("stream", STREAMED, ids=["whole", "streamed"])
@pytest.mark.parametrize("native", list(MEANING))
def test_azure_openai_reads_each_value(stops: StopsStack, native: str, stream: bool) -> None:
    model = f"sdk-{uuid.uuid4().hex[:12]}"
    stops.upstream.script(model, answer(native, stream))
    client = azure_client(stops)
    messages: Any = [{"role": "user", "content": "hi"}]
    if not stream:
        whole = client.chat.completions.create(model=model, messages=messages)
        choice = whole.choices[0]
        finish: str | None = choice.finish_reason
        extra: dict[str, Any] = choice.to_dict()
        prompt_filter: Any = whole.to_dict()["prompt_filter_results"]
    else:
        chunks = list(client.chat.completions.create(model=model, messages=messages, stream=True))
        prompt_filter = chunks[0].to_dict()["prompt_filter_results"]
        ends = [c.choices[0] for c in chunks if c.choices and c.choices[0].finish_reason]
        (end,) = ends
        finish, extra = end.finish_reason, end.to_dict()
    assert finish == native
    assert (
        stops.upstream.received[model][-1].path == f"/openai/deployments/{model}/chat/completions"
    )
    assert prompt_filter[0]["content_filter_results"]["jailbreak"] == {
        "filtered": False,
        "detected": False,
    }
    violence = extra["content_filter_results"].get("violence")
    if native == "content_filter":
        assert violence == {"filtered": True, "severity": "high"}


def test_azure_openai_reads_a_filtered_prompt(stops: StopsStack) -> None:
    model = f"sdk-{uuid.uuid4().hex[:12]}"
    stops.upstream.script(model, Script(status=400, body=filtered_prompt_body(hate="medium")))
    with pytest.raises(openai.BadRequestError) as caught:
        azure_client(stops).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.code == "content_filter"
    error: Any = caught.value.body
    inner = error["innererror"]
    assert inner["code"] == "ResponsibleAIPolicyViolation"
    assert inner["content_filter_result"]["hate"] == {"filtered": True, "severity": "medium"}
