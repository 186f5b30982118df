"""Upstream SSE events whose `data` spans several `data:` lines (the SSE spec allows it; here
each event's JSON is pretty-printed, one line per `data:` field). The decoder joins the lines;
a relayed event must reach the client with a `data:` prefix on every line again, so the real
OpenAI and Anthropic SDKs read the same answer as from one-line events. Text, parallel tool calls
and a stop sequence, through every client/upstream pair."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.formats.sse import SSEDecoder, encode
from tests.scenarios import Answer
from tests.test_matrix_support import (
    PAIR_IDS,
    PAIRS,
    TEXT,
    check_tools,
    drive,
    script_for,
    two_tools,
)
from tests.upstream import Script


def multiline(chunk: bytes) -> bytes:
    """The same SSE event with its JSON data pretty-printed over several `data:` lines."""
    head, _, data = chunk.rstrip(b"\n").rpartition(b"data: ")
    if data == b"[DONE]":
        return chunk
    pretty = orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2)
    return head + b"\n".join(b"data: " + line for line in pretty.split(b"\n")) + b"\n\n"


def multiline_script(wire: str, answer: Answer, stream: bool = True) -> Any:
    def make(model: str) -> Script:
        script = script_for(wire, answer, model, stream)
        script.chunks = [multiline(chunk) for chunk in script.chunks]
        assert all(chunk.count(b"data: ") > 2 for chunk in script.chunks[:-1])
        return script

    return make


def test_encode_prefixes_every_line_of_joined_data():
    joined = b'{\n  "a": 1\n}'
    frames = SSEDecoder().feed(encode(joined, "message_delta"))
    assert [(f.event, f.data) for f in frames] == [("message_delta", joined)]
    assert encode(joined) == b'data: {\ndata:   "a": 1\ndata: }\n\n'


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_text(stack, upstream, unique_model, client, wire):
    answer = Answer(text=TEXT)
    script = multiline_script(wire, answer)
    seen = drive(stack, upstream, unique_model, client, wire, answer, stream=True, script=script)
    assert seen.error is None, seen.error
    assert seen.text == TEXT
    assert seen.gateway is not None and seen.gateway["truncated"] is False


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_parallel_tool_calls(stack, upstream, unique_model, client, wire):
    tools = two_tools(wire)
    answer = Answer(text="Checking both.", tools=tools)
    script = multiline_script(wire, answer)
    seen = drive(stack, upstream, unique_model, client, wire, answer, stream=True, script=script)
    assert seen.error is None, seen.error
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    check_tools(seen, tools, client)


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_stop_sequence(stack, upstream, unique_model, client, wire):
    native = "stop" if wire == "openai" else "stop_sequence"
    answer = Answer(text="One, two", native_stop=native, stop_sequence="three")
    script = multiline_script(wire, answer)
    seen = drive(stack, upstream, unique_model, client, wire, answer, stream=True, script=script)
    assert seen.error is None, seen.error
    assert seen.text == "One, two"
    if client == "anthropic" and wire == "anthropic":
        assert (seen.stop, seen.stop_sequence) == ("stop_sequence", "three")
