"""The Responses wire's aggregated response is identical however the upstream bytes are split.

As tests/test_split_property.py does for the other wires: every single split point, byte-at-a-time
feeding and random multi-split chunkings (hypothesis), each through SSE decoder -> Responses
decoder -> ChunkAggregator. The streams: the recorded Responses fixtures, and streams built with
the test upstream's writer holding 1- to 4-byte characters in reasoning, text, function-call
arguments and a custom tool's raw input, with CRLF line ends and with JSON pretty-printed over
several `data:` lines.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures_util import chunked, replay, replay_frames, sse_frames, stream_body, summary
from tests.responses_upstream import (
    call_item,
    reasoning_item,
    response,
    responses_sse,
    stream_events,
    text_item,
)
from tests.test_split_property import frame_key

WIRE = "openai_responses"
TEXT = "Grüße aus Zürich ✓ — 東京 😀🎉 ünïcödé."
ARGUMENTS = '{"ort": "Paris 🗼 — Café ✓", "n": [1, {"é": null}]}'
RAW_INPUT = '*** Begin Patch\n+ "ünï" 😀\tend'


def custom_call_events() -> list[dict[str, Any]]:
    item = {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_c", "name": "apply_patch"}
    pieces = [RAW_INPUT[i : i + 3] for i in range(0, len(RAW_INPUT), 3)]
    return [
        {"type": "response.output_item.added", "output_index": 3, "item": {**item, "input": ""}},
        *(
            {"type": "response.custom_tool_call_input.delta", "output_index": 3, "delta": piece}
            for piece in pieces
        ),
        {
            "type": "response.output_item.done",
            "output_index": 3,
            "item": {**item, "input": RAW_INPUT},
        },
    ]


def non_ascii_stream() -> bytes:
    events = stream_events(
        [
            reasoning_item("Überlegung: 思考 ✓"),
            text_item(TEXT),
            call_item("call_1", "f", ARGUMENTS),
        ],
        size=3,
    )
    events.pop()  # the terminal event goes after the custom call
    final = {"type": "response.completed", "response": response([])}
    return b"".join(responses_sse([*events, *custom_call_events(), final]))


def non_ascii_crlf_stream() -> bytes:
    return non_ascii_stream().replace(b"\n", b"\r\n")


def multiline_crlf_stream() -> bytes:
    out = []
    for event in non_ascii_stream().split(b"\n\n"):
        if not event.strip():
            continue
        head, _, data = event.partition(b"\ndata: ")
        pretty = orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2)
        out.append(head + b"".join(b"\ndata: " + line for line in pretty.split(b"\n")) + b"\n\n")
    return b"".join(out).replace(b"\n", b"\r\n")


SYNTHETIC = {
    "synthetic:non-ascii": non_ascii_stream,
    "synthetic:non-ascii-crlf": non_ascii_crlf_stream,
    "synthetic:multiline-crlf": multiline_crlf_stream,
}
STREAMS = [
    "openai_responses/vercel_ai__openai-reasoning-encrypted-content.1.chunks.jsonl",
    "openai_responses/vercel_ai__github-copilot-id-rotation.chunks.jsonl",
    "openai_responses/vercel_ai__openai-phase.1.chunks.jsonl",
    *SYNTHETIC,
]
ERROR_STREAM = "openai_responses/vercel_ai__openai-error.1.chunks.jsonl"


def load(name: str) -> bytes:
    if name in SYNTHETIC:
        return SYNTHETIC[name]()
    body = stream_body(name)
    # The reasoning fixture holds four streams back to back; a replay reads the first.
    end = body.find(b"event: response.completed\n")
    return body if end < 0 else body[: body.index(b"\n\n", end) + 2]


@functools.cache
def reference(name: str) -> tuple[bytes, dict[str, Any]]:
    body = load(name)
    return body, summary(replay(body, WIRE).response)


def every_split_gives(name: str, expected: dict[str, Any]) -> None:
    body = load(name)
    results = {frame_key(sse_frames([body])): expected}
    for i in range(len(body) + 1):
        frames = sse_frames([body[:i], body[i:]])
        key = frame_key(frames)
        if key not in results:
            results[key] = summary(replay_frames(frames, WIRE).response)
        if results[key] != expected:
            assert results[key] == expected, (
                f"split at byte {i} of {len(body)}: {body[max(i - 8, 0) : i + 8]!r}"
            )


@pytest.mark.parametrize("name", STREAMS)
def test_every_single_split_point_gives_the_same_response(name):
    _, expected = reference(name)
    assert expected["complete"] is True and expected["error"] is None
    every_split_gives(name, expected)


def test_every_split_of_the_recorded_error_stream_gives_the_same_error():
    _, expected = reference(ERROR_STREAM)
    assert expected["error"] == ("upstream_error", "insufficient_quota")
    every_split_gives(ERROR_STREAM, expected)


@pytest.mark.parametrize("name", [*STREAMS, ERROR_STREAM])
def test_byte_at_a_time_gives_the_same_response(name):
    body, expected = reference(name)
    chunks = [body[i : i + 1] for i in range(len(body))]
    assert summary(replay(body, WIRE, chunks).response) == expected


def test_the_references_are_the_streams_answers():
    _, built = reference("synthetic:non-ascii")
    assert built["text"] == TEXT
    assert built["thinking"] == "Überlegung: 思考 ✓"
    assert [(c["id"], c["parsed"]) for c in built["tool_calls"]] == [
        ("call_1", orjson.loads(ARGUMENTS)),
        ("call_c", {"input": RAW_INPUT}),
    ]
    assert built["stop_reason"] == "tool_calls"
    assert reference("synthetic:non-ascii-crlf")[1] == built
    assert reference("synthetic:multiline-crlf")[1] == built
    body = load("synthetic:non-ascii-crlf")
    assert b"\r\n" in body and sum(1 for b in body if 0x80 <= b <= 0xBF) > 25


CHUNKINGS = st.lists(st.integers(min_value=0, max_value=1 << 20), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([*STREAMS, ERROR_STREAM]), CHUNKINGS)
def test_random_multi_split_chunkings_give_the_same_response(name, raw_points):
    body, expected = reference(name)
    chunks = chunked(body, [p % (len(body) + 1) for p in raw_points])
    assert summary(replay(body, WIRE, chunks).response) == expected
