"""The offline mock speaks real Anthropic wire: checked by strict SSE reading and the SDK fold."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent

from providers.base import ProviderRequest
from providers.mock import SCENARIOS, MockProvider

# scenario -> (stop_reason the stream ends with, content block types)
EXPECTED: dict[str, tuple[str | None, list[str]]] = {
    "text": ("end_turn", ["text"]),
    "tool": ("tool_use", ["tool_use"]),
    "parallel-tools": ("tool_use", ["tool_use", "tool_use"]),
    "tool-cut": ("max_tokens", ["text", "tool_use"]),
    "length": ("max_tokens", ["text"]),
    "refusal": ("refusal", ["text"]),
    "no-terminator": (None, ["text"]),
    "stop-sequence": ("stop_sequence", ["text"]),
    "pause": ("pause_turn", ["text"]),
    "context-window": ("model_context_window_exceeded", ["text"]),
    "unknown-stop": ("some_future_reason", ["text"]),
    "error-mid-stream": (None, ["text"]),
    "thinking": ("end_turn", ["thinking", "text"]),
}
BROKEN = {"no-terminator", "error-mid-stream"}
WEATHER_TOOLS = [{"name": "lookup_city", "input_schema": {"type": "object"}}]
TWO_TOOLS = [*WEATHER_TOOLS, {"name": "local_time", "input_schema": {"type": "object"}}]


def body(model: str, **extra: Any) -> bytes:
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    return orjson.dumps({"model": model, "max_tokens": 64, "messages": messages, **extra})


async def send(model: str, *, stream: bool, **extra: Any) -> tuple[int, dict, list[bytes]]:
    reply = await MockProvider().send(
        ProviderRequest(body(model, **extra), stream=stream, model=model)
    )
    chunks = [chunk async for chunk in reply.iter_chunks()]
    reply.release()
    return reply.status, dict(reply.headers), chunks


def parse_sse(data: bytes) -> list[dict[str, Any]]:
    """Read frames the strict way: `event:` line, `data:` line, blank line; names must match."""
    assert data.endswith(b"\n\n")
    events = []
    for frame in data[:-2].split(b"\n\n"):
        event_line, data_line = frame.split(b"\n")
        assert event_line.startswith(b"event: ")
        assert data_line.startswith(b"data: ")
        event = orjson.loads(data_line.removeprefix(b"data: "))
        assert event["type"] == event_line.removeprefix(b"event: ").decode()
        events.append(event)
    return events


def check_grammar(events: list[dict[str, Any]]) -> None:
    """message_start, then blocks opened in index order, one at a time; nothing after the end."""
    assert events[0]["type"] == "message_start"
    assert events[0]["message"]["stop_reason"] is None
    open_index, next_index = None, 0
    for event in events[1:]:
        kind = event["type"]
        if kind == "content_block_start":
            assert open_index is None and event["index"] == next_index
            open_index, next_index = next_index, next_index + 1
        elif kind in ("content_block_delta", "content_block_stop"):
            assert event["index"] == open_index
            if kind == "content_block_stop":
                open_index = None
        else:
            assert kind in ("ping", "message_delta", "message_stop", "error")
    assert [e["type"] for e in events].count("message_start") == 1


def sdk_fold(events: list[dict[str, Any]]):
    """The official SDK's accumulator over typed events (it skips ping and raises on error)."""
    snapshot, json_bufs = None, {}
    for event in events:
        if event["type"] in ("ping", "error"):
            continue
        typed = construct_type(type_=RawMessageStreamEvent, value=event)
        snapshot = accumulate_event(event=typed, current_snapshot=snapshot, json_bufs=json_bufs)
    assert snapshot is not None
    return snapshot


async def stream_events(model: str, **extra: Any) -> list[dict[str, Any]]:
    status, headers, chunks = await send(model, stream=True, **extra)
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    events = parse_sse(b"".join(chunks))
    assert len(chunks) == len(events)  # one frame per piece: the stream is visibly incremental
    return events


def test_scenarios_are_all_covered() -> None:
    assert set(SCENARIOS) == set(EXPECTED)


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_stream_is_valid_anthropic_wire(scenario: str) -> None:
    events = await stream_events(f"mock-{scenario}")
    check_grammar(events)
    snapshot = sdk_fold(events)

    stop_reason, block_types = EXPECTED[scenario]
    assert snapshot.stop_reason == stop_reason
    assert [block.type for block in snapshot.content] == block_types
    assert snapshot.model == f"mock-{scenario}"
    assert snapshot.id.startswith("msg_mock_")
    assert snapshot.usage.input_tokens == len(body(f"mock-{scenario}")) // 4
    assert snapshot.usage.output_tokens >= 1


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - BROKEN))
async def test_complete_stream_ends_with_delta_and_stop(scenario: str) -> None:
    types = [e["type"] for e in await stream_events(f"mock-{scenario}")]
    assert types[-2:] == ["message_delta", "message_stop"]
    assert types[1] == "ping"


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - BROKEN))
async def test_non_stream_body_equals_the_stream_fold(scenario: str) -> None:
    snapshot = sdk_fold(await stream_events(f"mock-{scenario}", tools=TWO_TOOLS))
    status, headers, chunks = await send(f"mock-{scenario}", stream=False, tools=TWO_TOOLS)
    message = orjson.loads(b"".join(chunks))

    assert status == 200
    assert headers["content-type"] == "application/json"
    assert message["type"] == "message"
    assert message["id"].startswith("msg_mock_")
    assert message["stop_reason"] == snapshot.stop_reason
    assert message["stop_sequence"] == snapshot.stop_sequence
    assert message["stop_details"] == (snapshot.stop_details and snapshot.stop_details.to_dict())
    assert message["usage"]["output_tokens"] == snapshot.usage.output_tokens
    assert without_random(message["content"]) == without_random(
        [block.to_dict() for block in snapshot.content]
    )


def without_random(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool ids and signatures are fresh per request; blank them to compare two requests."""
    return [{**b, **{k: "*" for k in ("id", "signature") if k in b}} for b in content]


async def test_text_streams_in_several_deltas() -> None:
    events = await stream_events("mock-text")
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert len(deltas) > 3
    assert "offline mock provider" in "".join(deltas)
    assert sdk_fold(events).content[0].text == "".join(deltas)


@pytest.mark.parametrize("model", ["mock", "mock-no-such-scenario", "claude-whatever", "text"])
async def test_unknown_model_falls_back_to_text(model: str) -> None:
    snapshot = sdk_fold(await stream_events(model))
    assert snapshot.stop_reason == "end_turn"
    assert "offline mock provider" in snapshot.content[0].text
    assert snapshot.model == model


async def test_scenario_name_without_prefix_also_works() -> None:
    assert sdk_fold(await stream_events("tool")).stop_reason == "tool_use"


async def test_tool_uses_the_first_request_tool_and_streams_split_json() -> None:
    events = await stream_events("mock-tool", tools=TWO_TOOLS)
    pieces = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    (tool,) = sdk_fold(events).content

    assert pieces[0] == ""
    assert '"city"' not in pieces[1]  # split mid-key, like the real API may do
    assert "".join(pieces) == '{"city": "Paris"}'
    assert (tool.name, tool.input) == ("lookup_city", {"city": "Paris"})
    assert tool.id.startswith("toolu_mock_")


async def test_tool_defaults_to_get_weather() -> None:
    (tool,) = sdk_fold(await stream_events("mock-tool")).content
    assert (tool.name, tool.input) == ("get_weather", {"city": "Paris"})


@pytest.mark.parametrize(
    ("tools", "names"),
    [(TWO_TOOLS, ["lookup_city", "local_time"]), (WEATHER_TOOLS, ["lookup_city", "lookup_city"])],
)
async def test_parallel_tools(tools: list[dict[str, Any]], names: list[str]) -> None:
    content = sdk_fold(await stream_events("mock-parallel-tools", tools=tools)).content
    assert [block.name for block in content] == names
    assert [block.input for block in content] == [{"city": "Paris"}, {"city": "Tokyo"}]
    assert content[0].id != content[1].id


async def test_tool_cut_leaves_the_tool_block_open() -> None:
    events = await stream_events("mock-tool-cut", tools=WEATHER_TOOLS)
    types = [e["type"] for e in events]
    raw = "".join(
        e["delta"].get("partial_json", "") for e in events if "delta" in e and "index" in e
    )
    snapshot = sdk_fold(events)

    assert raw == '{"city": "Par'
    assert [e["index"] for e in events if e["type"] == "content_block_stop"] == [0]
    assert types[-3:] == ["content_block_delta", "message_delta", "message_stop"]
    assert snapshot.content[1].name == "lookup_city"
    assert snapshot.content[1].input == {}  # the SDK's partial parser drops the cut string


async def test_tool_cut_non_stream_has_lenient_empty_input() -> None:
    _, _, chunks = await send("mock-tool-cut", stream=False)
    message = orjson.loads(b"".join(chunks))
    assert message["stop_reason"] == "max_tokens"
    assert message["content"][1]["type"] == "tool_use"
    assert message["content"][1]["input"] == {}


async def test_length_reports_max_tokens_as_output() -> None:
    snapshot = sdk_fold(await stream_events("mock-length"))
    assert snapshot.stop_reason == "max_tokens"
    assert snapshot.usage.output_tokens == 64
    assert snapshot.content[0].text.endswith("in the mid")


async def test_refusal_carries_stop_details() -> None:
    snapshot = sdk_fold(await stream_events("mock-refusal"))
    assert snapshot.stop_details is not None
    assert snapshot.stop_details.type == "refusal"
    assert snapshot.stop_details.category is None
    assert snapshot.stop_details.explanation
    assert snapshot.content[0].text == ""


@pytest.mark.parametrize(
    ("extra", "expected"), [({"stop_sequences": ["END", "X"]}, "END"), ({}, "\n\nHuman:")]
)
async def test_stop_sequence(extra: dict[str, Any], expected: str) -> None:
    snapshot = sdk_fold(await stream_events("mock-stop-sequence", **extra))
    assert snapshot.stop_reason == "stop_sequence"
    assert snapshot.stop_sequence == expected


async def test_no_terminator_stream_just_ends() -> None:
    events = await stream_events("mock-no-terminator")
    types = [e["type"] for e in events]
    assert "message_delta" not in types
    assert "message_stop" not in types
    assert types[-1] == "content_block_stop"


async def test_no_terminator_non_stream_body_is_cut_json() -> None:
    status, _, chunks = await send("mock-no-terminator", stream=False)
    data = b"".join(chunks)
    assert status == 200
    assert data.startswith(b'{"id":"msg_mock_')
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(data)


async def test_error_mid_stream() -> None:
    events = await stream_events("mock-error-mid-stream")
    assert events[-1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert [e["type"] for e in events][-2] == "content_block_delta"
    assert sdk_fold(events).content[0].text.startswith("This answer")


async def test_error_non_stream_is_529_overloaded() -> None:
    status, headers, chunks = await send("mock-error-mid-stream", stream=False)
    error = orjson.loads(b"".join(chunks))
    assert status == 529
    assert headers["content-type"] == "application/json"
    assert error["type"] == "error"
    assert error["error"] == {"type": "overloaded_error", "message": "Overloaded"}


async def test_thinking_block_has_text_and_signature() -> None:
    events = await stream_events("mock-thinking")
    delta_types = [e["delta"]["type"] for e in events if e["type"] == "content_block_delta"]
    thinking, text = sdk_fold(events).content

    assert delta_types.index("signature_delta") > delta_types.index("thinking_delta")
    assert delta_types.count("thinking_delta") > 1
    assert thinking.thinking.startswith("The user")
    assert len(thinking.signature) > 20
    assert "offline mock provider" in text.text


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]"])
async def test_invalid_request_body_is_a_400(raw: bytes) -> None:
    reply = await MockProvider().send(ProviderRequest(raw, stream=True, model="mock"))
    error = orjson.loads(await reply.read())
    assert reply.status == 400
    assert error["error"]["type"] == "invalid_request_error"


async def test_provider_identity() -> None:
    provider = MockProvider("offline")
    assert (provider.name, provider.wire) == ("offline", "anthropic")
    await provider.close()
