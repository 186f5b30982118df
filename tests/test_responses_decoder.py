"""The OpenAI Responses wire decoder: its grammar, its completeness rule and its shape checks,
driven frame by frame (no I/O), and the recorded Responses fixtures replayed whole."""

from __future__ import annotations

from typing import Any

import orjson
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
from gateway.formats.openai_responses import OpenAIResponsesDecoder, response_events
from gateway.formats.openai_responses_items import usage_event
from gateway.formats.registry import UNREADABLE, wire_for
from gateway.formats.shape import ShapeError
from gateway.formats.sse import SSEFrame
from tests.fixtures_util import load_json, replay, replay_body, stream_body
from tests.responses_upstream import (
    call_item,
    failed_events,
    reasoning_item,
    refusal_item,
    response,
    responses_sse,
    stream_events,
    text_item,
)

S = StopReason
WIRE = "openai_responses"


def decode_all(events: list[dict[str, Any]], eof: bool = True) -> list[Any]:
    decoder = OpenAIResponsesDecoder()
    out: list[Any] = []
    for event in events:
        out += decoder.decode(SSEFrame(event["type"], orjson.dumps(event)))[1]
    return out + (decoder.eof() if eof else [])


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def body_of(events: list[dict[str, Any]]) -> bytes:
    return b"".join(responses_sse(events))


def test_the_registry_row():
    wire = wire_for(WIRE)
    assert wire.stream_decoder is OpenAIResponsesDecoder
    assert wire.body_events is response_events
    assert wire.stop_reason("incomplete:max_output_tokens") is S.LENGTH


def test_a_text_stream_gives_start_text_usage_stop_end():
    events = decode_all(stream_events([text_item("Hello, wörld")], size=3))
    assert isinstance(events[0], MessageStart)
    assert (events[0].id, events[0].model) == ("resp_1", "gpt-up")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello, wörld"
    assert kinds(events[-3:]) == ["Usage", "Stop", "StreamEnd"]
    usage = events[-3]
    assert (usage.input_tokens, usage.output_tokens) == (12, 34)
    assert (usage.cache_read_tokens, usage.reasoning_tokens) == (5, 7)
    assert (events[-2].reason, events[-2].native) == (S.STOP, "completed")
    assert events[-1].terminator_seen is True


def test_calls_get_contiguous_ordinals_call_ids_and_their_arguments():
    calls = [call_item("call_a", "f", '{"x": 1}'), call_item("call_b", "g", '{"y": [2]}')]
    events = decode_all(stream_events([reasoning_item("hm"), text_item("ok"), *calls], size=2))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [(0, "call_a", "f"), (1, "call_b", "g")]
    for ordinal, call in enumerate(calls):
        parts = [e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == ordinal]
        assert "".join(parts) == call["arguments"]
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "hm"
    stop = next(e for e in events if isinstance(e, Stop))
    assert (stop.reason, stop.native) == (S.TOOL_CALLS, "completed")


def test_arguments_given_only_in_done_events_are_taken_once():
    item = call_item("call_a", "f", '{"x": 1}')
    events = [
        e for e in stream_events([item]) if e["type"] != "response.function_call_arguments.delta"
    ]
    out = decode_all(events)
    assert [e.arguments for e in out if isinstance(e, ToolCallDelta)] == ['{"x": 1}']


def test_an_item_given_only_in_its_done_event_is_read_whole():
    stream = stream_events([])
    final = stream.pop()
    done = {"type": "response.output_item.done", "output_index": 0, "item": text_item("whole")}
    call = {
        "type": "response.output_item.done",
        "output_index": 1,
        "item": call_item("c", "f", "{}"),
    }
    out = decode_all([*stream, done, call, final])
    assert [e.text for e in out if isinstance(e, TextDelta)] == ["whole"]
    assert [(e.index, e.id) for e in out if isinstance(e, ToolCallStart)] == [(0, "c")]


def test_a_stream_that_streams_no_item_is_read_from_its_terminal_response():
    items = [text_item("only at the end"), call_item("call_z", "f", '{"a": 2}')]
    start = stream_events([])[:2]
    final = {"type": "response.completed", "response": response(items)}
    out = decode_all([*start, final])
    assert [e.text for e in out if isinstance(e, TextDelta)] == ["only at the end"]
    assert [(e.id, e.name) for e in out if isinstance(e, ToolCallStart)] == [("call_z", "f")]
    assert next(e for e in out if isinstance(e, Stop)).reason is S.TOOL_CALLS


def test_the_terminal_output_is_not_read_again_when_items_were_streamed():
    # The phase fixture's completed output skips output_index 1: positions never match indexes.
    out = decode_all(stream_events([text_item("once")]))
    assert [e.text for e in out if isinstance(e, TextDelta)] == ["once"]


def test_refusal_text_with_completed_is_refusal():
    out = decode_all(stream_events([refusal_item("No.")]))
    assert [e.text for e in out if isinstance(e, RefusalDelta)] == ["No."]
    stop = next(e for e in out if isinstance(e, Stop))
    assert (stop.reason, stop.native) == (S.REFUSAL, "completed")


@pytest.mark.parametrize(
    ("reason", "normalized"),
    [("max_output_tokens", S.LENGTH), ("content_filter", S.CONTENT_FILTER), ("new", S.UNKNOWN)],
)
def test_incomplete_completes_the_stream_with_its_reason(reason, normalized):
    out = decode_all(stream_events([text_item("cut")], "incomplete", reason))
    assert kinds(out[-2:]) == ["Stop", "StreamEnd"]
    assert (out[-2].reason, out[-2].native) == (normalized, f"incomplete:{reason}")


def test_a_body_without_a_terminal_event_is_truncated():
    out = decode_all(stream_events([text_item("cut")], terminal=False))
    assert isinstance(out[-1], StreamError) and out[-1].kind == "truncated"
    assert not any(isinstance(e, StreamEnd | Stop) for e in out)


def test_response_failed_is_an_upstream_error_with_its_code():
    events = stream_events([text_item("x")], terminal=False) + failed_events("server_error")[1:]
    out = decode_all(events)
    assert kinds(out[-1:]) == ["StreamError"]
    error = out[-1]
    assert (error.kind, error.error_type, error.message) == (
        "upstream_error",
        "server_error",
        "The model failed",
    )
    assert not any(isinstance(e, StreamEnd) for e in out)


@pytest.mark.parametrize(
    "event",
    [
        {
            "type": "error",
            "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "m"},
        },
        {"type": "error", "code": "insufficient_quota", "message": "m", "param": None},
    ],
    ids=["nested", "flat"],
)
def test_an_error_event_in_either_shape_ends_the_stream(event):
    start = stream_events([])[:2]
    failed = failed_events("insufficient_quota")[1]
    out = decode_all([*start, event, failed])
    errors = [e for e in out if isinstance(e, StreamError)]
    assert [(e.error_type, e.message) for e in errors] == [("insufficient_quota", "m")]


def test_an_error_event_status_is_kept():
    event = {
        "type": "error",
        "status": 429,
        "error": {"code": "rate_limit_exceeded", "message": "m"},
    }
    [error] = [e for e in decode_all([event]) if isinstance(e, StreamError)]
    assert error.status == 429


def test_custom_tool_call_input_is_carried_as_input_json():
    raw = 'line "one"\n\tüñí 😀'
    added = {
        "type": "custom_tool_call",
        "id": "ct_1",
        "call_id": "call_c",
        "name": "apply_patch",
        "input": "",
    }
    events = [
        *stream_events([])[:2],
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        *(
            {
                "type": "response.custom_tool_call_input.delta",
                "output_index": 0,
                "delta": raw[i : i + 3],
            }
            for i in range(0, len(raw), 3)
        ),
        {"type": "response.output_item.done", "output_index": 0, "item": {**added, "input": raw}},
        {"type": "response.completed", "response": response([])},
    ]
    out = decode_all(events)
    arguments = "".join(e.arguments for e in out if isinstance(e, ToolCallDelta))
    assert orjson.loads(arguments) == {"input": raw}
    assert next(e for e in out if isinstance(e, Stop)).reason is S.TOOL_CALLS
    whole = response_events(response([{**added, "input": raw}]))
    assert [orjson.loads(e.arguments) for e in whole if isinstance(e, ToolCallDelta)] == [
        {"input": raw}
    ]


def test_an_identical_repeated_created_is_dropped_a_different_one_breaks():
    created = stream_events([])[0]
    decoder = OpenAIResponsesDecoder()
    frame = SSEFrame("response.created", orjson.dumps(created))
    assert kinds(decoder.decode(frame)[1]) == ["MessageStart"]
    assert decoder.decode(frame) == (None, [])
    other = {**created, "response": {**created["response"], "id": "resp_2"}}
    _, events = decoder.decode(SSEFrame(None, orjson.dumps(other)))
    assert kinds(events) == ["StreamError"] and events[0].kind == "protocol"


def added(position: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": position, "item": item}


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ([added(0, text_item("")), added(0, text_item(""))], "added output index 0 twice"),
        (
            [{"type": "response.output_text.delta", "output_index": 3, "delta": "x"}],
            "output item 3, never added",
        ),
        (
            [
                added(0, text_item("")),
                {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{"},
            ],
            "function_call input for output item 0",
        ),
        (
            [
                added(0, text_item("")),
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": call_item("c", "f", "{}"),
                },
            ],
            "changed the type of output item 0",
        ),
    ],
    ids=["index-twice", "delta-unknown-item", "arguments-for-a-message", "type-changed"],
)
def test_order_violations_break_the_stream(events, problem):
    out = decode_all(events, eof=False)
    assert isinstance(out[-1], StreamError) and out[-1].kind == "protocol"
    assert problem in out[-1].message


@pytest.mark.parametrize(
    "data",
    [
        b"[1, 2]",
        b"not json",
        b'{"type": "response.output_item.added", "output_index": "0", "item": {}}',
        b'{"type": "response.output_item.added", "output_index": 0, "item": "x"}',
        b'{"type": "response.created", "response": []}',
        b'{"type": "response.completed", "response": {"output": {}}}',
    ],
)
def test_wrong_shapes_raise_as_the_registry_expects(data):
    with pytest.raises(UNREADABLE):
        OpenAIResponsesDecoder().decode(SSEFrame(None, data))


def test_unknown_and_content_part_events_pass_without_events():
    decoder = OpenAIResponsesDecoder()
    for kind in ("response.content_part.added", "response.web_search_call.searching", "x.new"):
        obj, events = decoder.decode(SSEFrame(kind, orjson.dumps({"type": kind})))
        assert obj == {"type": kind} and events == []


def test_a_whole_response_body():
    body = response([reasoning_item("plan"), text_item("hi"), call_item("call_1", "f", '{"a":1}')])
    events = response_events(body)
    assert kinds(events) == [
        "MessageStart",
        "ThinkingDelta",
        "TextDelta",
        "ToolCallStart",
        "ToolCallDelta",
        "Usage",
        "Stop",
        "StreamEnd",
    ]
    assert (events[-2].reason, events[-2].native) == (S.TOOL_CALLS, "completed")


def test_a_whole_failed_or_unfinished_body_is_a_stream_error():
    failed = {
        **response([]),
        "status": "failed",
        "error": {"code": "server_error", "message": "boom"},
    }
    assert [
        (e.kind, e.error_type) for e in response_events(failed) if isinstance(e, StreamError)
    ] == [("upstream_error", "server_error")]
    queued = {**response([]), "status": "queued"}
    assert kinds(response_events(queued))[-1] == "StreamError"
    with pytest.raises(ShapeError):
        response_events({"id": "r", "status": "completed"})


# --- recorded fixtures ---------------------------------------------------------------------


def test_recorded_function_call_stream():
    result = replay(
        stream_body(
            "openai_responses/vercel_ai__openai-reasoning-encrypted-content.1.chunks.jsonl"
        ),
        WIRE,
    )
    resp = result.response
    assert [(c.id, c.name, c.parsed) for c in resp.tool_calls] == [
        ("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", {"a": 12, "b": 7, "op": "add"})
    ]
    assert (resp.stop_reason, resp.native_stop_reason, resp.complete) == (
        S.TOOL_CALLS,
        "completed",
        True,
    )
    assert resp.thinking.startswith("**Calculating step-by-step")
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (134, 28)


def test_recorded_id_rotation_stream_is_read_by_output_index():
    resp = replay(
        stream_body("openai_responses/vercel_ai__github-copilot-id-rotation.chunks.jsonl"), WIRE
    ).response
    assert resp.text.startswith("There are **3** letter")
    assert resp.thinking == "**Counting character occurrences**"
    assert (resp.stop_reason, resp.complete, resp.error) == (S.STOP, True, None)
    assert resp.usage.reasoning_tokens == 44


def test_recorded_phase_stream_and_body_agree():
    resp = replay(
        stream_body("openai_responses/vercel_ai__openai-phase.1.chunks.jsonl"), WIRE
    ).response
    # The recorded file keeps a few deltas of each message (sequence numbers skip): the text is
    # what the deltas say, the two message items joined without a separator.
    assert resp.text == "Got itHere are a few **AI"
    assert resp.usage.cache_read_tokens == 3072
    body = replay_body(load_json("openai_responses/vercel_ai__openai-phase.1.json"), WIRE).response
    assert body.text.startswith("I\u2019ll quickly check") and body.stop_reason is S.STOP


def test_recorded_error_stream():
    result = replay(stream_body("openai_responses/vercel_ai__openai-error.1.chunks.jsonl"), WIRE)
    resp = result.response
    assert (resp.stop_reason, resp.native_stop_reason) == (S.ERROR, "insufficient_quota")
    assert resp.complete is False
    assert isinstance(result.events[-1], StreamError)
    assert result.events[-1].message.startswith("You exceeded your current quota")


def test_usage_reads_every_figure_and_drops_strange_ones():
    usage = {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 6},
        "output_tokens": -1,
        "output_tokens_details": "x",
    }
    assert usage_event(usage) == Usage(20, None, 4, 6, None)
