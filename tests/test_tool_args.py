"""Tool-call arguments survive the gateway exactly, whatever the wire does to them.

- Arguments with unicode (umlauts, emoji, CJK, astral-plane escapes) and JSON escapes, split at
  odd places by the upstream, reach every client format equal after JSON parsing.
- OpenAI-wire streams whose tool-call chunks come interleaved (index 0 and 1 alternating), that
  number their first call 1 (Anthropic's OpenAI-compatible endpoint does), that put two calls in
  one chunk, or that number every call 0: the OpenAI SDK's `ChatCompletionStreamState` and the
  Anthropic SDK's stream helper fold the gateway's stream into the right calls, under both
  policies, and a cut one is withheld as a whole.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.scenarios import Answer, Tool
from tests.test_matrix_support import (
    PAIR_IDS,
    PAIRS,
    check_extension,
    check_tools,
    drive,
    run_tools,
)
from tests.upstream import Script, openai_sse

# Raw JSON argument texts, as a model would emit them.
UNICODE_ARGS = (
    '{"city": "Zürich", "note": "☔ rain 🌧️ tonight", "jp": "東京都渋谷区", '
    '"ko": "서울", "math": "∑ x² ≤ ∞"}'
)
ESCAPED_ARGS = (
    '{"quote": "he said \\"hi\\"", "path": "C:\\\\tmp\\\\new", "lines": "a\\nb\\tc\\r", '
    '"u": "\\u00fc\\u00df\\u2028\\u2029", "astral": "\\ud83d\\ude00 \\ud83c\\udf0d", '
    '"slash": "a\\/b", "ctrl": "\\u0000\\u001f"}'
)
NESTED_ARGS = (
    '{"filters": {"tags": ["a", "ß", "😀"], "range": [-1, 2.5, 3e2, 1E-3]}, '
    '"flags": [true, false, null], "empty": {}, "none": [], "s": ""}'
)
ARG_CASES = {"unicode": UNICODE_ARGS, "escapes": ESCAPED_ARGS, "nested": NESTED_ARGS}


def test_argument_texts_are_valid_json():
    for raw in ARG_CASES.values():
        json.loads(raw)
    assert json.loads(ESCAPED_ARGS)["astral"] == "😀 🌍"


ARG_PARAMS = [
    pytest.param(client, wire, stream, name, id=f"{pid}-{'stream' if stream else 'whole'}-{name}")
    for (client, wire), pid in zip(PAIRS, PAIR_IDS, strict=True)
    for stream in (True, False)
    for name in ARG_CASES
]


@pytest.mark.parametrize(("client", "wire", "stream", "case"), ARG_PARAMS)
def test_arguments_survive_byte_for_byte(stack, upstream, unique_model, client, wire, stream, case):
    raw = ARG_CASES[case]
    prefix = "call" if wire == "openai" else "toolu"
    tools = [
        Tool(f"{prefix}_ü1", "lookup", raw),
        Tool(f"{prefix}_2", "ping", "{}"),
    ]
    run_tools(stack, upstream, unique_model, client, wire, stream, tools, text="Zürich: 東京")


# --- hand-built OpenAI-wire chunk lists ----------------------------------------------------

A_ID, B_ID = "call_interleaved_A", "call_interleaved_B"
A_ARGS = '{"city": "Zürich", "days": [1, 2]}'
B_ARGS = '{"tz": "Asia/Tokyo", "label": "東京 \\"HQ\\""}'
TEXT = "Checking both."


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": "chatcmpl-hand",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [choice],
    }


def _start(index: int, call_id: str, name: str, args: str = "") -> dict[str, Any]:
    fn = {"name": name, "arguments": args}
    return {"index": index, "id": call_id, "type": "function", "function": fn}


def _args(index: int, args: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": args}}


def _split(text: str, at: int) -> tuple[str, str]:
    return text[:at], text[at:]


def tool_deltas(layout: str) -> list[list[dict[str, Any]]]:
    """Per chunk, the tool_calls list of its delta."""
    a1, a2 = _split(A_ARGS, 11)
    b1, b2 = _split(B_ARGS, 14)
    if layout == "interleaved":  # index 0 and 1 alternating
        return [
            [_start(0, A_ID, "get_weather")],
            [_start(1, B_ID, "get_time")],
            [_args(0, a1)],
            [_args(1, b1)],
            [_args(0, a2)],
            [_args(1, b2)],
        ]
    if layout == "first-index-1":  # Anthropic's OpenAI-compatible endpoint
        return [
            [_start(1, A_ID, "get_weather")],
            [_args(1, a1)],
            [_args(1, a2)],
            [_start(2, B_ID, "get_time")],
            [_args(2, b1)],
            [_args(2, b2)],
        ]
    if layout == "interleaved-from-1":
        return [
            [_start(1, A_ID, "get_weather", a1)],
            [_start(2, B_ID, "get_time", b1)],
            [_args(1, a2)],
            [_args(2, b2)],
        ]
    if layout == "two-in-one-chunk":
        return [
            [_start(0, A_ID, "get_weather"), _start(1, B_ID, "get_time")],
            [_args(0, a1), _args(1, b1)],
            [_args(0, a2), _args(1, b2)],
        ]
    if layout == "every-call-index-0":  # servers that number every call 0, new id per call
        return [
            [_start(0, A_ID, "get_weather", a1)],
            [_args(0, a2)],
            [_start(0, B_ID, "get_time", b1)],
            [_args(0, b2)],
        ]
    raise AssertionError(layout)


LAYOUTS = [
    "interleaved",
    "first-index-1",
    "interleaved-from-1",
    "two-in-one-chunk",
    "every-call-index-0",
]


def hand_script(model: str, layout: str, finish: str) -> Script:
    chunks = [_chunk(model, {"role": "assistant", "content": ""})]
    chunks.append(_chunk(model, {"content": TEXT}))
    chunks += [_chunk(model, {"tool_calls": calls}) for calls in tool_deltas(layout)]
    chunks.append(_chunk(model, {}, finish))
    usage = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    chunks.append({**_chunk(model, {}), "choices": [], "usage": usage})
    return Script(chunks=openai_sse(chunks))


EXPECTED = [Tool(A_ID, "get_weather", A_ARGS), Tool(B_ID, "get_time", B_ARGS)]
HAND_CASES = [
    pytest.param(client, layout, policy, id=f"{client}-client-{layout}-{policy}")
    for client in ("openai", "anthropic")
    for layout in LAYOUTS
    for policy in ("withhold", "pass")
]


@pytest.mark.parametrize(("client", "layout", "policy"), HAND_CASES)
def test_odd_tool_chunk_layouts(stack, upstream, unique_model, client, layout, policy):
    seen = drive(
        stack,
        upstream,
        unique_model,
        client,
        "openai",
        Answer(),
        stream=True,
        policy=policy,
        script=lambda model: hand_script(model, layout, "tool_calls"),
        tool_names=["get_time", "get_weather"],
    )
    assert seen.error is None, seen.error
    assert seen.text == TEXT
    assert seen.stop == ("tool_calls" if client == "openai" else "tool_use")
    check_tools(seen, EXPECTED, client, exact_raw=True)
    check_extension(
        seen, stop="tool_calls", native="tool_calls", wire="openai", truncated=False, stream=True
    )


@pytest.mark.parametrize(("client", "layout", "policy"), HAND_CASES)
def test_odd_tool_chunk_layouts_cut(stack, upstream, unique_model, client, layout, policy):
    """The same layouts ending in `length`: withheld as a whole, or passed with ids intact."""
    seen = drive(
        stack,
        upstream,
        unique_model,
        client,
        "openai",
        Answer(),
        stream=True,
        policy=policy,
        script=lambda model: hand_script(model, layout, "length"),
        tool_names=["get_time", "get_weather"],
    )
    assert seen.error is None, seen.error
    assert seen.text == TEXT
    assert seen.stop == ("length" if client == "openai" else "max_tokens")
    if policy == "withhold":
        assert seen.tools == []
        withheld = [{"id": t.id, "name": t.name} for t in EXPECTED]
    else:
        check_tools(seen, EXPECTED, client, exact_raw=True)
        withheld = []
    check_extension(
        seen,
        stop="length",
        native="length",
        wire="openai",
        truncated=True,
        withheld=withheld,
        stream=True,
    )
