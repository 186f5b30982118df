"""Every scenario of the offline mock provider, through the gateway, with both real SDKs.

The mock speaks the Anthropic wire, so an Anthropic client is a same-format passthrough and an
OpenAI client a translation. Each scenario is checked streaming and not: what the client sees
(its own format's stop reason, text, tool calls, thinking) and the `gateway` extension object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest

from providers.mock import SCENARIOS
from tests.conftest import (
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    openai_client,
)

USER = [{"role": "user", "content": "What is the weather in Paris and Tokyo?"}]
HELLO = (
    "Hello! This is the offline mock provider of the LLM gateway. No model was called: this "
    "canned answer lets you try clients and streaming without network access or API keys."
)
LONG = (
    "Here is a long answer that keeps going well past the token budget the request allowed, "
    "so the last sentence is cut off right in the mid"
)
REASONING = "The user wants a short answer. A friendly greeting that names the mock is enough."
OA_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} of a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    for name in ("get_weather", "get_time")
]
AN_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in OA_TOOLS
]
EXT_KEYS = {
    "stop_reason",
    "native_stop_reason",
    "provider",
    "request_id",
    "truncated",
    "withheld_tool_calls",
}


@dataclass(frozen=True)
class Expect:
    openai_finish: str
    anthropic_stop: str
    normalized: str
    native: str
    text: str = ""
    truncated: bool = False
    tools: tuple[tuple[str, dict[str, Any]], ...] = ()  # (name, arguments) delivered


# Scenarios that end normally (a complete response in both SDKs).
COMPLETE = {
    "text": Expect("stop", "end_turn", "stop", "end_turn", HELLO),
    "tool": Expect(
        "tool_calls",
        "tool_use",
        "tool_calls",
        "tool_use",
        tools=(("get_weather", {"city": "Paris"}),),
    ),
    "parallel-tools": Expect(
        "tool_calls",
        "tool_use",
        "tool_calls",
        "tool_use",
        tools=(("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})),
    ),
    "tool-cut": Expect(
        "length", "max_tokens", "length", "max_tokens", "Let me look up the weather.", True
    ),
    "length": Expect("length", "max_tokens", "length", "max_tokens", LONG, True),
    "refusal": Expect("content_filter", "refusal", "refusal", "refusal"),
    "stop-sequence": Expect(
        "stop", "stop_sequence", "stop_sequence", "stop_sequence", "One, two, three."
    ),
    "pause": Expect("stop", "pause_turn", "pause", "pause_turn", "This turn ends with pause_turn."),
    "context-window": Expect(
        "length",
        "model_context_window_exceeded",
        "context_window",
        "model_context_window_exceeded",
        "This turn ends with model_context_window_exceeded.",
        True,
    ),
    "unknown-stop": Expect(
        "stop",
        "some_future_reason",  # the mock speaks Anthropic's wire: passed through as sent
        "unknown",
        "some_future_reason",
        "This turn ends with some_future_reason.",
    ),
    "thinking": Expect("stop", "end_turn", "stop", "end_turn", HELLO),
}
BROKEN = ("no-terminator", "error-mid-stream")


def test_every_mock_scenario_is_covered():
    assert set(SCENARIOS) == set(COMPLETE) | set(BROKEN)


# --- what each SDK delivered, folded into one shape ---------------------------------------------


@dataclass
class Seen:
    stop: str | None = None
    text: str = ""
    tools: list[tuple[str, str, str]] = field(default_factory=list)  # id, name, raw arguments
    gateway: dict[str, Any] | None = None
    native_finish: str | None = None  # OpenAI choices only
    reasoning: str = ""
    thinking_signature: str = ""
    stop_sequence: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def oa_kwargs(scenario: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": f"mock-{scenario}", "messages": USER, "tools": OA_TOOLS}
    if scenario == "stop-sequence":
        kwargs["stop"] = ["END"]
    return kwargs


def an_kwargs(scenario: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": f"mock-{scenario}",
        "max_tokens": 256,
        "messages": USER,
        "tools": AN_TOOLS,
    }
    if scenario == "stop-sequence":
        kwargs["stop_sequences"] = ["END"]
    return kwargs


def oa_completion(completion: Any) -> Seen:
    choice = completion.choices[0]
    message = choice.message
    return Seen(
        stop=choice.finish_reason,
        text=message.content or "",
        tools=[(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []],
        gateway=(completion.model_extra or {}).get("gateway"),
        native_finish=(choice.model_extra or {}).get("native_finish_reason"),
        reasoning=(message.model_extra or {}).get("reasoning_content") or "",
    )


class OAStreamFold:
    def __init__(self) -> None:
        self.seen = Seen()
        self.calls: dict[int, list[str]] = {}
        self.chunks_after_finish = 0

    def feed(self, chunk: Any) -> None:
        seen = self.seen
        if seen.stop is not None and chunk.choices:
            self.chunks_after_finish += 1
        for choice in chunk.choices:
            delta = choice.delta
            seen.text += delta.content or ""
            seen.reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or []:
                slot = self.calls.setdefault(call.index, ["", "", ""])
                if call.id:
                    slot[0] = call.id
                if call.function and call.function.name:
                    slot[1] += call.function.name
                if call.function and call.function.arguments:
                    slot[2] += call.function.arguments
            if choice.finish_reason is not None:
                seen.stop = choice.finish_reason
                seen.native_finish = (choice.model_extra or {}).get("native_finish_reason")
                seen.gateway = (chunk.model_extra or {}).get("gateway")

    def done(self) -> Seen:
        self.seen.tools = [tuple(self.calls[i]) for i in sorted(self.calls)]  # type: ignore[misc]
        return self.seen


def an_message(message: Any) -> Seen:
    seen = Seen(
        stop=message.stop_reason,
        stop_sequence=message.stop_sequence,
        gateway=(message.model_extra or {}).get("gateway"),
        extra=dict(message.model_extra or {}),
    )
    for block in message.content:
        if block.type == "text":
            seen.text += block.text
        elif block.type == "thinking":
            seen.reasoning += block.thinking
            seen.thinking_signature = block.signature
        elif block.type == "tool_use":
            seen.tools.append((block.id, block.name, json.dumps(block.input)))
    return seen


def openai_run(base_client: openai.OpenAI, scenario: str, stream: bool) -> Seen:
    kwargs = oa_kwargs(scenario)
    if not stream:
        return oa_completion(base_client.chat.completions.create(**kwargs))
    fold = OAStreamFold()
    for chunk in base_client.chat.completions.create(**kwargs, stream=True):
        fold.feed(chunk)
    assert fold.chunks_after_finish == 0
    return fold.done()


def anthropic_run(client: anthropic.Anthropic, scenario: str, stream: bool) -> Seen:
    kwargs = an_kwargs(scenario)
    if not stream:
        return an_message(client.messages.create(**kwargs))
    gateway = None
    with client.messages.stream(**kwargs) as s:
        for event in s:
            if event.type == "message_delta":
                gateway = (event.model_extra or {}).get("gateway")
        message = s.get_final_message()
    seen = an_message(message)
    seen.gateway = gateway
    return seen


def check_gateway(seen: Seen, expect: Expect) -> None:
    ext = seen.gateway
    assert ext is not None, "no gateway extension object"
    assert set(ext) >= EXT_KEYS
    assert ext["stop_reason"] == expect.normalized
    assert ext["native_stop_reason"] == expect.native
    assert ext["provider"] == "mock"
    assert ext["truncated"] is expect.truncated
    assert isinstance(ext["request_id"], str) and ext["request_id"]


def check_tools(seen: Seen, expect: Expect) -> None:
    assert [(name, json.loads(args)) for _, name, args in seen.tools] == list(expect.tools)
    ids = [i for i, _, _ in seen.tools]
    assert all(i.startswith("toolu_mock_") for i in ids), ids
    assert len(set(ids)) == len(ids)


# --- complete scenarios -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("scenario", list(COMPLETE))
def test_openai_sdk(stack, scenario, stream):
    expect = COMPLETE[scenario]
    seen = openai_run(openai_client(stack), scenario, stream)
    assert seen.stop == expect.openai_finish
    assert seen.native_finish == expect.native
    assert seen.text == expect.text
    check_tools(seen, expect)
    check_gateway(seen, expect)
    if scenario == "tool-cut":
        (withheld,) = seen.gateway["withheld_tool_calls"]
        assert withheld["name"] == "get_weather"
        assert withheld["id"].startswith("toolu_mock_")
        assert set(withheld) == {"id", "name"}
    else:
        assert seen.gateway["withheld_tool_calls"] == []
    if scenario == "thinking":
        assert seen.reasoning == REASONING
    else:
        assert seen.reasoning == ""


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("scenario", list(COMPLETE))
def test_anthropic_sdk(stack, scenario, stream):
    expect = COMPLETE[scenario]
    seen = anthropic_run(anthropic_client(stack), scenario, stream)
    assert seen.stop == expect.anthropic_stop
    assert seen.text == expect.text
    check_tools(seen, expect)
    check_gateway(seen, expect)
    if scenario == "tool-cut":
        (withheld,) = seen.gateway["withheld_tool_calls"]
        assert withheld["name"] == "get_weather"
        assert withheld["id"].startswith("toolu_mock_")
    else:
        assert seen.gateway["withheld_tool_calls"] == []
    if scenario == "stop-sequence":
        assert seen.stop_sequence == "END"
    if scenario == "thinking":
        assert seen.reasoning == REASONING
        assert seen.thinking_signature
    else:
        assert seen.reasoning == ""


def test_anthropic_refusal_keeps_stop_details(stack):
    message = anthropic_client(stack).messages.create(**an_kwargs("refusal"))
    details = (message.model_extra or {}).get("stop_details") or getattr(
        message, "stop_details", None
    )
    if not isinstance(details, dict):
        details = details.model_dump() if details is not None else None
    assert details is not None and details["type"] == "refusal"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_tool_cut_under_pass_policy(stack, stream):
    # `pass` hands the cut call over, with the faithful stop reason, and withholds nothing.
    seen = openai_run(openai_client(stack, "pass"), "tool-cut", stream)
    assert seen.stop == "length"
    assert [name for _, name, _ in seen.tools] == ["get_weather"]
    # The arguments as the upstream sent them: cut in a stream; the mock's whole body has `{}`.
    assert seen.tools[0][2] == ('{"city": "Par' if stream else "{}")
    assert seen.gateway["withheld_tool_calls"] == []
    assert seen.gateway["truncated"] is True

    seen = anthropic_run(anthropic_client(stack, "pass"), "tool-cut", stream)
    assert seen.stop == "max_tokens"
    assert [name for _, name, _ in seen.tools] == ["get_weather"]
    assert seen.gateway["withheld_tool_calls"] == []


# --- scenarios that break -----------------------------------------------------------------------


def test_no_terminator_openai_stream_raises_after_the_text(stack):
    text = []
    stream = openai_client(stack).chat.completions.create(**oa_kwargs("no-terminator"), stream=True)
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            assert not (chunk.choices and chunk.choices[0].finish_reason)
            if chunk.choices:
                text.append(chunk.choices[0].delta.content or "")
    assert "".join(text) == HELLO
    assert isinstance(info.value.body, dict)


def test_no_terminator_anthropic_stream_raises_after_the_text(stack):
    text = []
    client = anthropic_client(stack)
    with (
        pytest.raises(anthropic.APIError) as info,
        client.messages.stream(**an_kwargs("no-terminator")) as s,
    ):
        for event in s:
            if event.type == "text":
                text.append(event.text)
            assert event.type != "message_stop"
    assert "".join(text) == HELLO
    body = info.value.body
    assert body["type"] == "error"
    assert body["gateway"]["truncated"] is True
    assert body["gateway"]["provider"] == "mock"


def test_no_terminator_whole_is_502(stack):
    with pytest.raises(openai.InternalServerError) as oa_info:
        openai_client(stack).chat.completions.create(**oa_kwargs("no-terminator"))
    assert oa_info.value.status_code == 502
    with pytest.raises(anthropic.InternalServerError) as an_info:
        anthropic_client(stack).messages.create(**an_kwargs("no-terminator"))
    assert an_info.value.status_code == 502
    assert an_info.value.body["type"] == "error"


def test_error_mid_stream_openai(stack):
    text = []
    stream = openai_client(stack).chat.completions.create(
        **oa_kwargs("error-mid-stream"), stream=True
    )
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            if chunk.choices:
                text.append(chunk.choices[0].delta.content or "")
    assert "".join(text) == "This answer will be interrupted by"
    assert info.value.message


def test_error_mid_stream_anthropic(stack):
    text = []
    client = anthropic_client(stack)
    with (
        pytest.raises(anthropic.APIError) as info,
        client.messages.stream(**an_kwargs("error-mid-stream")) as s,
    ):
        for event in s:
            if event.type == "text":
                text.append(event.text)
    assert "".join(text) == "This answer will be interrupted by"
    body = info.value.body
    assert body["error"]["type"] == "overloaded_error"
    assert body["gateway"]["stop_reason"] == "error"
    assert body["gateway"]["truncated"] is True


def test_error_mid_stream_whole_is_an_overloaded_status(stack):
    with pytest.raises(anthropic.APIStatusError) as an_info:
        anthropic_client(stack).messages.create(**an_kwargs("error-mid-stream"))
    assert an_info.value.status_code == 529
    assert an_info.value.body["error"]["type"] == "overloaded_error"
    with pytest.raises(openai.APIStatusError) as oa_info:
        openai_client(stack).chat.completions.create(**oa_kwargs("error-mid-stream"))
    assert 500 <= oa_info.value.status_code < 600


# --- async clients ------------------------------------------------------------------------------


async def test_async_openai_sdk_tool_and_stream(stack):
    client = async_openai_client(stack)
    completion = await client.chat.completions.create(**oa_kwargs("parallel-tools"))
    seen = oa_completion(completion)
    check_tools(seen, COMPLETE["parallel-tools"])
    fold = OAStreamFold()
    async for chunk in await client.chat.completions.create(**oa_kwargs("tool-cut"), stream=True):
        fold.feed(chunk)
    seen = fold.done()
    assert seen.stop == "length"
    assert seen.tools == []
    assert [w["name"] for w in seen.gateway["withheld_tool_calls"]] == ["get_weather"]
    await client.close()


async def test_async_anthropic_sdk_thinking_and_stream(stack):
    client = async_anthropic_client(stack)
    message = await client.messages.create(**an_kwargs("thinking"))
    assert [b.type for b in message.content] == ["thinking", "text"]
    async with client.messages.stream(**an_kwargs("tool")) as s:
        final = await s.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].input == {"city": "Paris"}
    await client.close()
