"""The AWS event-stream framing and the Bedrock Converse decoder, below the gateway.

The recorded Bedrock streams (tests/fixtures/other/vercel_ai__amazon-bedrock-*.chunks.jsonl,
decoded events one a line) are encoded into binary event-stream bytes by the tests' own encoder
and read back through the framing and the decoder at every split point, and a byte at a time:
each gives what the unsplit body gives. Bad CRCs, cut messages, impossible lengths, exception
events and the whole-body decoder are checked too.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from gateway.events import Event, StopReason, StreamEnd, StreamError
from gateway.formats import stop_reasons
from gateway.formats.aws_eventstream import FRAMING_ERROR, EventStreamFraming
from gateway.formats.registry import wire_for
from gateway.formats.sse import SSEFrame
from gateway.normalize.aggregate import ChunkAggregator
from tests.bedrock_upstream import (
    converse_body,
    event_message,
    event_stream,
    exception_message,
    fixture_events,
    message,
    stream_events,
    text_blocks,
    tool_blocks,
)
from tests.fixtures_util import summary

FIXTURES = Path(__file__).parent / "fixtures" / "other"
STREAMS = sorted(p.name for p in FIXTURES.glob("vercel_ai__amazon-bedrock-*.chunks.jsonl"))
WIRE = wire_for("bedrock")
CORAL = "http://internal.amazon.com/coral/com.amazon.bedrock/"


def fixture_body(name: str) -> bytes:
    lines = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line]
    return event_stream(fixture_events(lines))


def frames_of(chunks: list[bytes]) -> list[SSEFrame]:
    framing = EventStreamFraming()
    frames: list[SSEFrame] = []
    for chunk in chunks:
        frames += framing.feed(chunk)
    return frames + framing.close()


def replay(chunks: list[bytes]) -> tuple[dict[str, Any], list[Event]]:
    """The frames through the decoder and aggregator, as the relay reads them: nothing after
    the first terminal event."""
    decoder = WIRE.stream_decoder()
    agg = ChunkAggregator()
    seen: list[Event] = []
    ended = False
    for frame in frames_of(chunks):
        for event in decoder.decode(frame)[1]:
            seen.append(event)
            agg.handle(event)
            ended = ended or isinstance(event, StreamEnd | StreamError)
        if ended:
            break
    else:
        for event in decoder.eof():
            seen.append(event)
            agg.handle(event)
    return summary(agg.final()), seen


def test_there_are_recorded_streams():
    assert len(STREAMS) == 4, STREAMS


@pytest.mark.parametrize("name", STREAMS)
def test_every_split_point_gives_the_unsplit_result(name):
    body = fixture_body(name)
    whole, _ = replay([body])
    assert whole["complete"] and whole["error"] is None, whole
    for point in range(1, len(body)):
        assert replay([body[:point], body[point:]])[0] == whole, point


@pytest.mark.parametrize("name", STREAMS)
def test_a_byte_at_a_time_gives_the_unsplit_result(name):
    body = fixture_body(name)
    whole, _ = replay([body])
    assert replay([body[i : i + 1] for i in range(len(body))])[0] == whole


def test_the_recorded_text_stream_reads_as_recorded():
    got, _ = replay([fixture_body("vercel_ai__amazon-bedrock-text.chunks.jsonl")])
    assert got["text"].startswith('Let me count the "r"s in "strawberry"')
    assert got["stop_reason"] == StopReason.STOP and got["native_stop_reason"] == "end_turn"
    assert got["usage"][:2] == (22, 55)
    assert got["terminator_seen"] is True


def test_the_recorded_reasoning_stream_keeps_thinking_and_signature():
    got, events = replay([fixture_body("vercel_ai__amazon-bedrock-reasoning.chunks.jsonl")])
    assert got["thinking"].startswith("Let me count the r's")
    assert got["text"].startswith("There are **3** r's")
    signatures = [e.signature for e in events if getattr(e, "signature", None)]
    assert len(signatures) == 1 and signatures[0].startswith("Ep0CCkgI")


def test_the_recorded_tool_streams_give_their_calls():
    got, _ = replay([fixture_body("vercel_ai__amazon-bedrock-tool-call.1.chunks.jsonl")])
    assert [(c["id"], c["name"], c["arguments"]) for c in got["tool_calls"]] == [
        ("tool-use-id", "test-tool", '{"value":"Sparkle Day"}')
    ]
    assert got["stop_reason"] == StopReason.TOOL_CALLS
    got, _ = replay([fixture_body("vercel_ai__amazon-bedrock-tool-no-args.chunks.jsonl")])
    assert got["text"] == "I'll update the issue list for you."
    assert [(c["name"], c["arguments"]) for c in got["tool_calls"]] == [("updateIssueList", "")]


def test_usage_counts_cached_input_in_the_input_total():
    body = event_stream(stream_events(text_blocks("hello")))
    got, _ = replay([body])
    assert got["usage"] == (11 + 6 + 4, 7, 6, 4, None)


def test_the_matched_stop_sequence_is_read_from_additional_fields():
    body = event_stream(stream_events(text_blocks("a b"), "stop_sequence", stop_sequence="###"))
    got, _ = replay([body])
    assert (got["stop_reason"], got["stop_sequence"]) == (StopReason.STOP_SEQUENCE, "###")


@pytest.mark.parametrize("native", sorted(stop_reasons.BEDROCK_NATIVE))
def test_every_native_stop_reason_is_normalized(native):
    got, _ = replay([event_stream(stream_events(text_blocks("x y"), native))])
    assert got["stop_reason"] == stop_reasons.BEDROCK_NATIVE[native]
    assert got["native_stop_reason"] == native


def test_an_unknown_stop_reason_is_unknown_never_stop():
    got, _ = replay([event_stream(stream_events(text_blocks("x y"), "brand_new"))])
    assert got["stop_reason"] == StopReason.UNKNOWN


def test_a_stream_without_message_stop_is_truncated():
    events = stream_events(text_blocks("cut here"))
    body = event_stream([e for e in events if e[0] not in ("messageStop", "metadata")])
    got, _ = replay([body])
    assert got["error"] == ("truncated", None) and not got["complete"]


def test_message_stop_without_metadata_is_complete_at_the_end():
    body = event_stream(stream_events(text_blocks("no usage"), usage=None))
    got, _ = replay([body])
    assert got["complete"] and got["error"] is None


def test_a_bad_message_crc_is_a_protocol_error():
    good = event_stream(stream_events(text_blocks("hello there")))
    first = event_message("messageStart", {"role": "assistant"})
    bad = bytearray(good)
    bad[len(first) + 20] ^= 0x01  # inside the second message's headers
    got, events = replay([bytes(bad)])
    assert got["error"] == ("protocol", None)
    assert "ChecksumMismatch" in events[-1].message


def test_a_bad_prelude_crc_is_a_protocol_error():
    raw = bytearray(event_message("messageStart", {"role": "assistant"}))
    raw[9] ^= 0xFF
    frames = frames_of([bytes(raw)])
    assert [f.event for f in frames] == [FRAMING_ERROR]


def test_a_corrupt_length_is_caught_by_the_prelude_crc_before_waiting_for_it():
    raw = bytearray(event_message("messageStart", {"role": "assistant"}))
    raw[1] ^= 0x10  # total length + 1 MiB: still within bounds
    framing = EventStreamFraming()
    assert [f.event for f in framing.feed(bytes(raw[:12]))] == [FRAMING_ERROR]


def test_an_impossible_length_is_refused_at_once():
    framing = EventStreamFraming()
    frames = framing.feed(struct.pack(">III", 2**31, 0, 0))
    assert [f.event for f in frames] == [FRAMING_ERROR]
    assert framing.feed(b"more") == [] and framing.close() == []


def test_a_message_cut_by_the_end_of_the_body_is_a_protocol_error():
    body = event_stream(stream_events(text_blocks("hello")))
    got, _ = replay([body[:-3]])
    assert got["error"] == ("protocol", None)


def test_a_body_cut_between_messages_is_truncated_not_protocol():
    events = stream_events(text_blocks("hello"))
    body = event_stream(events[:3])
    got, _ = replay([body])
    assert got["error"] == ("truncated", None)


@pytest.mark.parametrize(
    ("name", "kind", "status"),
    [
        ("throttlingException", "rate_limit_error", 429),
        ("validationException", "invalid_request_error", 400),
        ("internalServerException", "api_error", 500),
        ("modelStreamErrorException", "api_error", 502),
        ("serviceUnavailableException", "overloaded_error", 503),
    ],
)
def test_exception_events_break_the_stream_with_a_type_and_status(name, kind, status):
    body = event_stream(stream_events(text_blocks("partial"))[:2])
    body += exception_message(name, "it went wrong")
    _, events = replay([body])
    error = events[-1]
    assert isinstance(error, StreamError)
    assert (error.kind, error.error_type, error.status) == ("upstream_error", kind, status)
    assert error.message == "it went wrong"


def test_an_error_message_type_is_read_from_its_headers():
    headers = {":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}
    _, events = replay([message(headers, b"")])
    error = events[-1]
    assert isinstance(error, StreamError) and error.message == "boom"
    assert error.error_type == "api_error"


def test_tool_input_for_a_block_that_is_not_a_tool_is_a_protocol_error():
    delta = {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}
    got, _ = replay([event_stream([("contentBlockDelta", delta)])])
    assert got["error"] == ("protocol", None)


def test_parallel_tool_calls_get_ordinals_in_order():
    blocks = text_blocks("two calls", 0)
    blocks += tool_blocks(1, "t1", "weather", '{"city": "Zürich"}')
    blocks += tool_blocks(2, "t2", "time", '{"zone": "UTC"}')
    got, _ = replay([event_stream(stream_events(blocks, "tool_use"))])
    assert [(c["index"], c["id"], c["arguments"]) for c in got["tool_calls"]] == [
        (0, "t1", '{"city": "Zürich"}'),
        (1, "t2", '{"zone": "UTC"}'),
    ]


def test_many_messages_in_one_chunk_and_compaction():
    blocks = [
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": f"w{i} "}})
        for i in range(500)
    ]
    body = event_stream(stream_events(blocks))
    whole, _ = replay([body])
    assert whole["text"] == "".join(f"w{i} " for i in range(500))
    sizes = [7, 1000, 3, 65536]
    chunks, at, n = [], 0, 0
    while at < len(body):
        size = sizes[n % len(sizes)]
        chunks.append(body[at : at + size])
        at, n = at + size, n + 1
    assert replay(chunks)[0] == whole


def test_the_whole_body_decoder_reads_the_recorded_bodies():
    for name, text in [
        ("vercel_ai__amazon-bedrock-text.json", 'Let me count the "r"s'),
        ("vercel_ai__amazon-bedrock-reasoning.json", "There are **3** r's"),
    ]:
        body = json.loads((FIXTURES / name).read_text())
        agg = ChunkAggregator()
        for event in WIRE.body_events(body):
            agg.handle(event)
        got = summary(agg.final())
        assert got["text"].startswith(text) and got["complete"], name
    body = json.loads((FIXTURES / "vercel_ai__amazon-bedrock-reasoning.json").read_text())
    agg = ChunkAggregator()
    for event in WIRE.body_events(body):
        agg.handle(event)
    assert agg.final().thinking.startswith("Let me count the r's")
    assert agg.final().usage.input_tokens == 51


def test_a_whole_body_tool_call_and_empty_input():
    content = [
        {"toolUse": {"toolUseId": "a", "name": "weather", "input": {"city": "Bern"}}},
        {"toolUse": {"toolUseId": "b", "name": "noargs", "input": {}}},
    ]
    agg = ChunkAggregator()
    for event in WIRE.body_events(json.loads(converse_body(content, "tool_use"))):
        agg.handle(event)
    got = summary(agg.final())
    assert [(c["id"], c["arguments"]) for c in got["tool_calls"]] == [
        ("a", '{"city":"Bern"}'),
        ("b", "{}"),
    ]


@pytest.mark.parametrize(
    ("header", "status_type"),
    [
        (
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "rate_limit_error",
        ),
        ("ValidationException", "invalid_request_error"),
        ("AccessDeniedException:x", "permission_error"),
        ("ResourceNotFoundException:x", "not_found_error"),
        ("ServiceUnavailableException:x", "overloaded_error"),
        ("ModelTimeoutException:x", "timeout_error"),
        ("InternalServerException:x", "api_error"),
    ],
)
def test_error_replies_name_their_exception(header, status_type):
    error = WIRE.error_fields({"message": "why"}, {"x-amzn-errortype": header})
    assert error is not None and (error.message, error.type) == ("why", status_type)


def test_an_error_reply_may_name_its_exception_in_the_body():
    body = {"__type": "com.amazon.coral.service#ThrottlingException", "message": "slow down"}
    error = WIRE.error_fields(body, {})
    assert error is not None and error.type == "rate_limit_error"
    assert WIRE.error_fields(["not", "an", "object"], {}) is None


def test_read_bytes_are_let_go_so_the_pending_buffer_stays_bounded():
    """No quadratic re-copying: what was read is compacted away, so the buffer holds at most
    about twice the unread bytes plus a chunk, however long the stream runs."""
    one = event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "w "}})
    body = one * 3000
    framing = EventStreamFraming()
    largest, frames = 0, 0
    for at in range(0, len(body), 100):
        frames += len(framing.feed(body[at : at + 100]))
        largest = max(largest, len(framing._pending))
    assert frames == 3000 and framing.close() == []
    assert largest <= 2 * (len(one) + 100)
