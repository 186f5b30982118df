"""The aggregated response is identical however the upstream byte stream is split.

For each recorded stream: every single split point (two chunks, `body[:i]` and `body[i:]`,
including inside multi-byte UTF-8 characters and inside `\\r\\n`), then random multi-split
chunkings and byte-at-a-time feeding. Each chunking goes through the whole pipeline: SSE decoder
-> wire decoder -> ChunkAggregator. Besides the recorded streams, three are rebuilt from them:
non-ASCII text deltas with CRLF line ends, non-ASCII tool arguments, and pretty-printed JSON over
several `data:` lines with CRLF (the case where a `\\r\\n` split across chunks matters).
"""

from __future__ import annotations

import functools
import logging

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.formats.sse import SSEFrame
from tests.fixtures_util import (
    chunked,
    join_events,
    replay,
    replay_frames,
    split_events,
    sse_frames,
    stream_body,
    summary,
)

STREAMS = [
    ("openai_chat/openai_python__parallel_tool_calls_stream.sse", "openai"),
    ("openai_chat/openai_python__tool_call_single_stream.sse", "openai"),
    ("openai_chat/openai_python__text_stream_usage.sse", "openai"),
    ("openai_chat/openai_python__refusal_stream.sse", "openai"),
    ("anthropic/anthropic_sdk__tool_use_response.sse", "anthropic"),
    ("anthropic/anthropic_sdk__incomplete_partial_json_response.sse", "anthropic"),
    ("anthropic/vercel_ai__anthropic-json-tool.1.chunks.jsonl", "anthropic"),
    # Recorded multi-byte UTF-8: "÷" (2 bytes) in thinking and text deltas.
    ("anthropic/vercel_ai__anthropic-clear-thinking.1.chunks.jsonl", "anthropic"),
    ("other/vercel_ai__openai-compatible-anthropic-fallback-tool-call.sse", "openai"),
]

# 1-, 2-, 3- and 4-byte characters, so that splits fall at every offset inside each.
NON_ASCII = ["Grüße", " aus ", "Zürich ✓", " — 東京", " 😀🎉", " ünïcödé", "."]


def non_ascii_openai_stream() -> bytes:
    """The recorded text stream with its first content deltas re-encoded as non-ASCII text (raw
    UTF-8 in the SSE bytes; the other deltas left out to keep it short), with CRLF line ends so
    that splits also fall between `\\r` and `\\n`."""
    body = stream_body("openai_chat/openai_python__text_stream_usage.sse")
    out: list[bytes] = []
    texts = iter(NON_ASCII)
    for event in split_events(body):
        data = event.removeprefix(b"data: ")
        if data == b"[DONE]":
            out.append(event)
            continue
        obj = orjson.loads(data)
        choices = obj["choices"]
        if choices and choices[0]["delta"].get("content"):
            piece = next(texts, None)
            if piece is None:
                continue
            choices[0]["delta"]["content"] = piece
        out.append(b"data: " + orjson.dumps(obj))
    return join_events(out).replace(b"\n", b"\r\n")


def multibyte_anthropic_tool_stream() -> bytes:
    """The recorded tool_use stream with non-ASCII input JSON split mid-character in the decoded
    partial_json strings (raw UTF-8 in the SSE bytes)."""
    body = stream_body("anthropic/anthropic_sdk__tool_use_response.sse")
    pieces = iter(['{"ort": "Pa', "ris 🗼 — ", "Café", ' ✓"}'])
    out: list[bytes] = []
    for event in split_events(body):
        head, _, data = event.partition(b"\ndata: ")
        obj = orjson.loads(data)
        delta = obj.get("delta") or {}
        if delta.get("type") == "input_json_delta" and delta["partial_json"]:
            delta["partial_json"] = next(pieces)
        out.append(head + b"\ndata: " + orjson.dumps(obj))
    return join_events(out)


def multiline_crlf_anthropic_stream() -> bytes:
    """The recorded tool_use stream as a server may legally send it: each JSON payload
    pretty-printed over several `data:` lines (joined back with `\\n`), CRLF line ends."""
    body = stream_body("anthropic/anthropic_sdk__tool_use_response.sse")
    out: list[bytes] = []
    for event in split_events(body):
        head, _, data = event.partition(b"\ndata: ")
        pretty = orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2)
        out.append(head + b"".join(b"\ndata: " + line for line in pretty.split(b"\n")))
    return join_events(out).replace(b"\n", b"\r\n")


def load(name: str) -> bytes:
    if name == "synthetic:openai-non-ascii":
        return non_ascii_openai_stream()
    if name == "synthetic:anthropic-non-ascii-tool":
        return multibyte_anthropic_tool_stream()
    if name == "synthetic:anthropic-multiline-crlf":
        return multiline_crlf_anthropic_stream()
    return stream_body(name)


ALL_STREAMS = [
    *STREAMS,
    ("synthetic:openai-non-ascii", "openai"),
    ("synthetic:anthropic-non-ascii-tool", "anthropic"),
    ("synthetic:anthropic-multiline-crlf", "anthropic"),
]


@pytest.fixture(autouse=True)
def _quiet_parse_warnings(caplog):
    # The cut-tool stream logs one parse warning per replay; thousands of them only cost time.
    caplog.set_level(logging.ERROR, logger="gateway.aggregate")


@functools.cache
def reference(name: str, wire: str) -> tuple[bytes, dict]:
    body = load(name)
    return body, summary(replay(body, wire).response)


@pytest.mark.parametrize(("name", "wire"), ALL_STREAMS, ids=[n for n, _ in ALL_STREAMS])
def test_every_single_split_point_gives_the_same_response(name, wire):
    body, expected = reference(name, wire)
    assert expected["complete"] is True  # every stream here ends cleanly: a broken
    assert expected["error"] is None  # reference cannot pass as "the same"
    # The wire decoder and the aggregator are fresh per replay and a pure function of the frame
    # sequence, so they run once per distinct sequence the SSE decoder gives, not once per split.
    results = {frame_key(sse_frames([body])): expected}
    for i in range(len(body) + 1):
        frames = sse_frames([body[:i], body[i:]])
        key = frame_key(frames)
        if key not in results:
            results[key] = summary(replay_frames(frames, wire).response)
        if results[key] != expected:  # one message per failing split, naming the split point
            assert results[key] == expected, (
                f"split at byte {i} of {len(body)}: {body[max(i - 8, 0) : i + 8]!r}"
            )


def frame_key(frames: list[SSEFrame]) -> tuple[tuple[str | None, bytes], ...]:
    return tuple((f.event, f.data) for f in frames)


@pytest.mark.parametrize(("name", "wire"), ALL_STREAMS, ids=[n for n, _ in ALL_STREAMS])
def test_byte_at_a_time_gives_the_same_response(name, wire):
    body, expected = reference(name, wire)
    chunks = [body[i : i + 1] for i in range(len(body))]
    assert summary(replay(body, wire, chunks).response) == expected


def test_the_streams_cover_splits_inside_multibyte_characters():
    bodies = [load(name) for name, _ in ALL_STREAMS]
    inside = sum(1 for body in bodies for b in body if 0x80 <= b <= 0xBF)  # continuation bytes
    assert inside > 25  # each is a split point strictly inside a character
    assert any(b"\r\n" in body for body in bodies)


def test_reference_results_are_the_recorded_answers():
    # Guard against a reference that is itself wrong in a way every split would share.
    _, parallel = reference("openai_chat/openai_python__parallel_tool_calls_stream.sse", "openai")
    assert [(c["id"], c["name"]) for c in parallel["tool_calls"]] == [
        ("call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs"),
        ("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price"),
    ]
    _, text = reference("synthetic:openai-non-ascii", "openai")
    assert text["text"] == "Grüße aus Zürich ✓ — 東京 😀🎉 ünïcödé."
    assert text["stop_reason"] == "stop" and text["complete"] and text["terminator_seen"]
    _, tool = reference("synthetic:anthropic-non-ascii-tool", "anthropic")
    assert tool["tool_calls"][0]["parsed"] == {"ort": "Paris 🗼 — Café ✓"}
    _, multiline = reference("synthetic:anthropic-multiline-crlf", "anthropic")
    _, recorded = reference("anthropic/anthropic_sdk__tool_use_response.sse", "anthropic")
    assert multiline == recorded
    _, thinking = reference(
        "anthropic/vercel_ai__anthropic-clear-thinking.1.chunks.jsonl", "anthropic"
    )
    assert thinking["text"] == "925 ÷ 5 = 185"


CHUNKINGS = st.lists(st.integers(min_value=0, max_value=1 << 20), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ALL_STREAMS), CHUNKINGS)
def test_random_multi_split_chunkings_give_the_same_response(stream, raw_points):
    name, wire = stream
    body, expected = reference(name, wire)
    chunks = chunked(body, [p % (len(body) + 1) for p in raw_points])
    assert summary(replay(body, wire, chunks).response) == expected
