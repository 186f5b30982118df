"""The text and tool-call rows of the matrix again, with the async SDK clients
(`openai.AsyncOpenAI`, `anthropic.AsyncAnthropic`), streaming and not, for every pair."""

from __future__ import annotations

import pytest

from tests.scenarios import Answer
from tests.test_matrix_support import (
    CUT_TEXT,
    PAIR_IDS,
    PAIRS,
    TEXT,
    adrive,
    check_extension,
    check_received,
    check_tools,
    cut_tools,
    one_tool,
    two_tools,
)

CASES = [
    pytest.param(client, wire, stream, id=f"{pid}-{'stream' if stream else 'whole'}")
    for (client, wire), pid in zip(PAIRS, PAIR_IDS, strict=True)
    for stream in (True, False)
]


@pytest.mark.parametrize(("client", "wire", "stream"), CASES)
async def test_async_text(stack, upstream, unique_model, client, wire, stream):
    seen = await adrive(
        stack, upstream, unique_model, client, wire, Answer(text=TEXT), stream=stream
    )
    assert seen.error is None, seen.error
    assert seen.text == TEXT
    assert seen.stop == ("stop" if client == "openai" else "end_turn")
    native = "stop" if wire == "openai" else "end_turn"
    check_extension(seen, stop="stop", native=native, wire=wire, truncated=False, stream=stream)
    check_received(seen, client, wire, stream=stream)


@pytest.mark.parametrize("count", [1, 2], ids=["one-tool", "two-tools"])
@pytest.mark.parametrize(("client", "wire", "stream"), CASES)
async def test_async_tool_calls(stack, upstream, unique_model, client, wire, stream, count):
    tools = one_tool(wire) if count == 1 else two_tools(wire)
    answer = Answer(text="On it.", tools=tools)
    seen = await adrive(stack, upstream, unique_model, client, wire, answer, stream=stream)
    assert seen.error is None, seen.error
    assert seen.text == "On it."
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    check_tools(seen, tools, client, exact_raw=client == wire == "openai")
    native = "tool_calls" if wire == "openai" else "tool_use"
    check_extension(
        seen, stop="tool_calls", native=native, wire=wire, truncated=False, stream=stream
    )


@pytest.mark.parametrize(("client", "wire", "stream"), CASES)
async def test_async_cut_tool_call_withheld(stack, upstream, unique_model, client, wire, stream):
    native = "length" if wire == "openai" else "max_tokens"
    tools = cut_tools(wire, both=True)
    answer = Answer(text=CUT_TEXT, tools=tools, native_stop=native)
    seen = await adrive(stack, upstream, unique_model, client, wire, answer, stream=stream)
    assert seen.error is None, seen.error
    assert seen.text == CUT_TEXT
    assert seen.stop == ("length" if client == "openai" else "max_tokens")
    assert seen.tools == []
    check_extension(
        seen,
        stop="length",
        native=native,
        wire=wire,
        truncated=True,
        stream=stream,
        withheld=[{"id": t.id, "name": t.name} for t in tools],
    )
