"""The Anthropic passthrough of a cut response under `withhold`: the tool_use block is dropped and
the blocks after it are renumbered, so the indexes the client sees stay contiguous. The Anthropic
SDK's accumulator looks blocks up by index: without the renumbering it raises IndexError."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import anthropic_client
from tests.test_matrix_support import raw_stream
from tests.upstream import Script, anthropic_sse


def cut_events(model: str) -> list[dict[str, Any]]:
    """Text, a whole tool call, then text cut at max_tokens (its block left open)."""
    message = {
        "id": "msg_cut",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 1},
    }
    tool = {"type": "tool_use", "id": "toolu_cut", "name": "lookup", "input": {}}
    stop = {"stop_reason": "max_tokens", "stop_sequence": None}
    return [
        {"type": "message_start", "message": message},
        *block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Let me check."}),
        {"type": "content_block_stop", "index": 0},
        *block(1, tool, {"type": "input_json_delta", "partial_json": '{"q": 1}'}),
        {"type": "content_block_stop", "index": 1},
        *block(2, {"type": "text", "text": ""}, {"type": "text_delta", "text": "And then I would"}),
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 64}},
        {"type": "message_stop"},
    ]


def block(index: int, start: dict[str, Any], delta: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        {"type": "content_block_delta", "index": index, "delta": delta},
    ]


@pytest.mark.parametrize(
    ("policy", "blocks"),
    [
        ("withhold", [("text", "Let me check."), ("text", "And then I would")]),
        ("pass", [("text", "Let me check."), ("tool_use", {"q": 1}), ("text", "And then I would")]),
    ],
)
def test_the_sdk_folds_a_cut_stream_with_its_tool_block_withheld(
    stack, upstream, unique_model, policy, blocks
):
    model = unique_model("an")
    upstream.script(model, Script(chunks=anthropic_sse(cut_events(model))))
    client = anthropic_client(stack, policy)
    messages = [{"role": "user", "content": "look it up"}]
    with client.messages.stream(model=model, max_tokens=64, messages=messages) as events:
        message = events.get_final_message()

    assert message.stop_reason == "max_tokens"
    seen = [(b.type, b.text if b.type == "text" else b.input) for b in message.content]
    assert seen == blocks


def test_the_indexes_on_the_wire_are_contiguous(stack, upstream, unique_model):
    model = unique_model("an")
    upstream.script(model, Script(chunks=anthropic_sse(cut_events(model))))
    frames = raw_stream(stack, "anthropic", model)
    starts = [f.json["index"] for f in frames if f.event == "content_block_start"]
    deltas = {f.json["index"] for f in frames if f.event == "content_block_delta"}
    stops = [f.json["index"] for f in frames if f.event == "content_block_stop"]
    assert starts == [0, 1] and deltas == {0, 1} and stops == [0, 1]
    (delta,) = [f.json for f in frames if f.event == "message_delta"]
    assert delta["gateway"]["withheld_tool_calls"] == [{"id": "toolu_cut", "name": "lookup"}]
