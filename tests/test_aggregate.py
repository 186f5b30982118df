"""ChunkAggregator: folding typed events into one normalized response."""

from __future__ import annotations

import logging

import pytest

from gateway.events import (
    MessageStart,
    RefusalDelta,
    Stop,
    StopReason,
    StreamEnd,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.normalize.aggregate import ChunkAggregator

S = StopReason


def fold(*events):
    agg = ChunkAggregator()
    for event in events:
        agg.handle(event)
    return agg


def test_text_thinking_refusal_are_joined_in_order():
    resp = fold(
        MessageStart("msg_1", "model-x"),
        ThinkingDelta("Let me "),
        ThinkingDelta("think."),
        ThinkingDelta("", "sig-1"),
        ThinkingDelta("", "sig-2"),
        TextDelta("Hel"),
        TextDelta("lo ÷ "),
        TextDelta("wörld"),
        RefusalDelta("No"),
        RefusalDelta("pe."),
        Stop(S.STOP, "end_turn"),
        StreamEnd(terminator_seen=True),
    ).final()
    assert (resp.id, resp.model) == ("msg_1", "model-x")
    assert resp.thinking == "Let me think."
    assert resp.thinking_signature == "sig-2"  # replaced, as the SDKs do
    assert resp.text == "Hello ÷ wörld"
    assert resp.refusal == "Nope."
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "end_turn")
    assert (resp.complete, resp.terminator_seen, resp.error) == (True, True, None)


def test_tool_calls_keep_raw_arguments_and_parse_at_the_end():
    agg = fold(
        ToolCallStart(0, "call_a", "get_weather"),
        ToolCallDelta(0, '{"ci'),
        ToolCallStart(1, "call_b", "no_args"),
        ToolCallDelta(0, 'ty": "Paris"}'),
        ToolCallStart(2, "call_c", "empty_object"),
        ToolCallDelta(2, "{}"),
        Stop(S.TOOL_CALLS, "tool_calls"),
    )
    assert agg.arguments(0) == '{"city": "Paris"}'
    assert [c.parsed for c in agg.tool_calls] == [None, None, None]  # not parsed before final()
    resp = agg.final()
    assert [(c.index, c.id, c.name, c.arguments, c.parsed, c.parse_failure)
            for c in resp.tool_calls] == [
        (0, "call_a", "get_weather", '{"city": "Paris"}', {"city": "Paris"}, None),
        (1, "call_b", "no_args", "", {}, None),  # no arguments at all become {}
        (2, "call_c", "empty_object", "{}", {}, None),
    ]  # fmt: skip


def test_delta_for_an_unknown_tool_index_is_ignored():
    resp = fold(ToolCallDelta(3, '{"x": 1}'), Stop(S.STOP, "stop")).final()
    assert resp.tool_calls == []


def test_parse_failure_is_recorded(caplog):
    caplog.set_level(logging.WARNING)
    resp = fold(ToolCallStart(0, "call_a", "f"), ToolCallDelta(0, '{"a": [1, 2')).final()
    failure = resp.tool_calls[0].parse_failure
    assert failure is not None
    assert (failure.tool_index, failure.error_class, failure.offset, failure.length) == (
        0,
        "JSONDecodeError",
        11,
        11,
    )
    assert resp.tool_calls[0].parsed is None
    assert resp.tool_calls[0].arguments == '{"a": [1, 2'
    assert len(caplog.records) == 1


def test_later_usage_replaces_only_the_fields_it_sets():
    resp = fold(
        Usage(input_tokens=43, output_tokens=1, cache_read_tokens=5),
        Usage(output_tokens=20),
        Usage(input_tokens=61, output_tokens=22, reasoning_tokens=7),
    ).final()
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_creation_tokens,
            u.reasoning_tokens) == (61, 22, 5, None, 7)  # fmt: skip


def test_stop_keeps_sequence_and_details():
    details = {"type": "refusal", "category": "cyber", "explanation": "no"}
    resp = fold(
        Stop(S.STOP_SEQUENCE, "stop_sequence", "###"), Stop(S.REFUSAL, "refusal", None, details)
    ).final()
    assert (resp.stop_reason, resp.native_stop_reason) == (S.REFUSAL, "refusal")
    assert resp.stop_sequence is None
    assert resp.stop_details == details
    resp = fold(Stop(S.STOP_SEQUENCE, "stop_sequence", "###")).final()
    assert (resp.stop_reason, resp.stop_sequence) == (S.STOP_SEQUENCE, "###")


def test_no_stop_at_all_is_unknown_and_incomplete():
    resp = fold(TextDelta("hi")).final()
    assert (resp.stop_reason, resp.native_stop_reason) == (S.UNKNOWN, None)
    assert (resp.complete, resp.terminator_seen) == (False, False)
    assert resp.cut is False


def test_stream_end_without_terminator_is_complete_but_recorded():
    resp = fold(Stop(S.STOP, "stop"), StreamEnd(terminator_seen=False)).final()
    assert (resp.complete, resp.terminator_seen) == (True, False)
    assert resp.stop_reason is S.STOP


@pytest.mark.parametrize(
    ("error", "reason", "native"),
    [
        (StreamError("truncated", "no message_stop"), S.ERROR, "gateway:stream_truncated"),
        (StreamError("protocol", "restart"), S.ERROR, "gateway:protocol"),
        (StreamError("timeout", "slow", "timeout_error"), S.ERROR, "timeout_error"),
        (StreamError("upstream_error", "busy", "overloaded_error"), S.ERROR, "overloaded_error"),
        (StreamError("aborted", "client left"), S.ABORTED, "gateway:aborted"),
    ],
)
def test_stream_error_cuts_the_response(error, reason, native):
    resp = fold(TextDelta("partial"), Stop(S.STOP, "stop"), error).final()
    assert (resp.stop_reason, resp.native_stop_reason) == (reason, native)
    assert resp.error is error
    assert resp.complete is False
    assert resp.cut is True
    assert resp.text == "partial"


def test_first_error_wins():
    first = StreamError("truncated", "first")
    resp = fold(first, StreamError("aborted", "second")).final()
    assert resp.error is first
    assert resp.stop_reason is S.ERROR


def test_a_broken_stream_stays_broken():
    """Events after a StreamError (a decoder that keeps decoding after a restart, a replay of a
    whole recorded file) must not turn the response back into a clean, uncut one."""
    error = StreamError("protocol", "upstream restarted the message mid-stream")
    resp = fold(
        ToolCallStart(0, "toolu_first", "f"),
        ToolCallDelta(0, '{"value":"Spark'),
        error,
        Stop(S.TOOL_CALLS, "tool_use"),
        StreamEnd(terminator_seen=True),
    ).final()
    assert resp.error is error
    assert resp.stop_reason is S.ERROR
    assert resp.complete is False
    assert resp.cut is True


def test_snapshot_and_stop_while_streaming():
    agg = fold(MessageStart("m", "x"), ToolCallStart(0, "c", "f"), Stop(S.LENGTH, "max_tokens"))
    assert agg.stop == (S.LENGTH, "max_tokens")
    assert agg.snapshot.id == "m"
    assert agg.error is None
    assert [(c.id, c.name) for c in agg.tool_calls] == [("c", "f")]
    assert agg.final().cut is True


# --- event order: a broken invariant is a protocol error, never merged or dropped ---------------


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        (
            [ToolCallStart(0, "a", "f"), ToolCallStart(0, "b", "g")],
            "tool call 0 started twice",
        ),
        ([ToolCallStart(1, "a", "f")], "tool call 1 started out of order"),
        ([ToolCallDelta(0, "{}")], "arguments for tool call 0, never started"),
        (
            [ToolCallStart(0, "a", "f"), ToolCallDelta(1, "{}")],
            "arguments for tool call 1, never started",
        ),
        (
            [StreamEnd(terminator_seen=True), TextDelta("late")],
            "TextDelta after the end of the stream",
        ),
        (
            [Stop(S.STOP, "stop"), StreamEnd(terminator_seen=True), Stop(S.LENGTH, "length")],
            "Stop after the end of the stream",
        ),
    ],
)
def test_an_event_out_of_order_is_a_protocol_error(events, problem):
    agg = ChunkAggregator()
    returned = [agg.handle(MessageStart("m", "x"))]
    returned += [agg.handle(event) for event in events]
    error = returned[-1]
    assert isinstance(error, StreamError) and error.kind == "protocol"
    assert error.message == f"upstream stream out of order: {problem}"
    assert returned[:-1] == [None] * (len(returned) - 1)
    resp = agg.final()
    assert resp.error is error and resp.stop_reason is S.ERROR and resp.cut
    assert resp.complete is False
    assert agg.handle(TextDelta("more")) is None  # broken stays broken, quietly


def test_a_stream_error_after_the_end_is_not_an_order_problem():
    """The client leaving after a complete answer is recorded, not blamed on the upstream."""
    agg = fold(MessageStart("m", "x"), Stop(S.STOP, "stop"), StreamEnd(terminator_seen=True))
    assert agg.handle(StreamError("aborted", "the client disconnected")) is None
    assert agg.error is not None and agg.error.kind == "aborted"


def test_final_is_computed_once(caplog):
    agg = fold(ToolCallStart(0, "a", "f"), ToolCallDelta(0, '{"x": '))
    with caplog.at_level(logging.WARNING, logger="gateway.aggregate"):
        first = agg.final()
        second = agg.final()
    assert first is second
    assert len([r for r in caplog.records if "not valid JSON" in r.getMessage()]) == 1
