"""Recorded provider streams and bodies replayed through wire decoder and ChunkAggregator.

Expected values are read off the fixture files themselves (ids, names, argument text, usage).
"""

from __future__ import annotations

import logging

import orjson
import pytest

from gateway.events import (
    MessageStart,
    Stop,
    StopReason,
    StreamEnd,
    StreamError,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.formats.openai_chat import OpenAIChatDecoder
from gateway.formats.sse import SSEFrame
from tests.fixtures_util import (
    drop_last_events,
    join_events,
    load_json,
    payload_lines,
    rebuild,
    replay,
    replay_body,
    split_events,
    stream_body,
    summary,
    wire_of,
)

S = StopReason


def run(name: str, **kwargs):
    return replay(stream_body(name), wire_of(name), **kwargs)


def usage(resp) -> tuple:
    u = resp.usage
    return (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_creation_tokens,
        u.reasoning_tokens,
    )


def calls(resp) -> list[tuple]:
    return [(c.index, c.id, c.name, c.arguments, c.parsed) for c in resp.tool_calls]


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


def assert_clean_end(resp) -> None:
    assert resp.complete is True
    assert resp.terminator_seen is True
    assert resp.error is None


# --- OpenAI Chat Completions ---------------------------------------------------------------------


def test_openai_parallel_tool_calls():
    result = run("openai_chat/openai_python__parallel_tool_calls_stream.sse")
    resp = result.response
    assert calls(resp) == [
        (
            0,
            "call_JMW1whyEaYG438VE1OIflxA2",
            "GetWeatherArgs",
            '{"city": "Edinburgh", "country": "GB", "units": "c"}',
            {"city": "Edinburgh", "country": "GB", "units": "c"},
        ),
        (
            1,
            "call_DNYTawLBoN8fj3KN6qU9N1Ou",
            "get_stock_price",
            '{"ticker": "AAPL", "exchange": "NASDAQ"}',
            {"ticker": "AAPL", "exchange": "NASDAQ"},
        ),
    ]
    assert all(c.parse_failure is None for c in resp.tool_calls)
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_calls")
    assert resp.text == ""
    assert usage(resp) == (149, 60, None, None, 0)
    assert (resp.id, resp.model) == ("chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63", "gpt-4o-2024-08-06")
    assert_clean_end(resp)
    starts = [e for e in result.events if isinstance(e, ToolCallStart)]
    assert [(e.index, e.id) for e in starts] == [
        (0, "call_JMW1whyEaYG438VE1OIflxA2"),
        (1, "call_DNYTawLBoN8fj3KN6qU9N1Ou"),
    ]
    # The recorded odd splits arrive as they were sent, never empty.
    deltas = [e.arguments for e in result.events if isinstance(e, ToolCallDelta)]
    assert deltas[:3] == ['{"ci', 'ty": ', '"Edinb']
    assert "" not in deltas
    assert kinds(result.events)[0] == "MessageStart"
    assert kinds(result.events)[-3:] == ["Stop", "Usage", "StreamEnd"]


def test_openai_single_tool_call():
    resp = run("openai_chat/openai_python__tool_call_single_stream.sse").response
    assert calls(resp) == [
        (
            0,
            "call_c91SqDXlYFuETYv8mUHzz6pp",
            "GetWeatherArgs",
            '{"city":"Edinburgh","country":"UK","units":"c"}',
            {"city": "Edinburgh", "country": "UK", "units": "c"},
        )
    ]
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_calls")
    assert usage(resp) == (76, 24, None, None, 0)
    assert_clean_end(resp)


def test_openai_text_stream_with_usage():
    resp = run("openai_chat/openai_python__text_stream_usage.sse").response
    assert resp.text == (
        "I'm unable to provide real-time weather updates. To get the current weather in San "
        "Francisco, I recommend checking a reliable weather website or a weather app."
    )
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "stop")
    assert resp.tool_calls == []
    assert usage(resp) == (14, 30, None, None, 0)
    assert_clean_end(resp)


def test_openai_refusal_stream():
    resp = run("openai_chat/openai_python__refusal_stream.sse").response
    assert resp.refusal == "I'm sorry, I can't assist with that request."
    assert resp.text == ""
    assert (resp.stop_reason, resp.native_stop_reason) == (S.REFUSAL, "stop")
    assert resp.cut is False
    assert usage(resp)[:2] == (79, 11)
    assert_clean_end(resp)


def test_openai_length_stream():
    resp = run("openai_chat/openai_python__length_max_tokens_1_stream.sse").response
    assert resp.text == '{"'
    assert (resp.stop_reason, resp.native_stop_reason) == (S.LENGTH, "length")
    assert resp.cut is True
    assert usage(resp)[:2] == (79, 1)
    assert_clean_end(resp)  # complete on the wire, yet cut by its stop reason


N3 = "openai_chat/openai_python__n3_multiple_choices_stream.sse"


def n3_frames() -> list[tuple[int | None, bytes]]:
    """(choice index of the finish_reason it carries, event) per recorded event."""
    out = []
    for event in split_events(stream_body(N3)):
        data = event.removeprefix(b"data: ")
        finished = None
        if data != b"[DONE]":
            for choice in orjson.loads(data)["choices"]:
                if choice["finish_reason"] is not None:
                    finished = choice["index"]
        out.append((finished, event))
    return out


def test_openai_n3_complete_only_when_every_choice_finished():
    decoder = OpenAIChatDecoder()
    finished: list[int] = []
    for choice, event in n3_frames():
        _, events = decoder.decode(SSEFrame(None, event.removeprefix(b"data: ")))
        if choice is not None:
            finished.append(choice)
        assert decoder.complete is (finished == [0, 1, 2]), (finished, event[:80])
        if choice is not None and choice != 2:
            assert not any(isinstance(e, StreamEnd | StreamError) for e in events)
    assert finished == [0, 1, 2]
    resp = run(N3).response
    assert resp.text == '{"city":"San Francisco","temperature":65,"units":"f"}'  # choice 0
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "stop")
    assert usage(resp)[:2] == (79, 42)
    assert_clean_end(resp)


def test_openai_n3_with_a_choice_that_never_finishes_is_truncated():
    kept = [event for choice, event in n3_frames() if choice != 2]
    no_done = join_events(e for e in kept if e != b"data: [DONE]")
    result = replay(no_done, "openai")
    assert isinstance(result.events[-1], StreamError)
    assert result.events[-1].kind == "truncated"
    resp = result.response
    assert resp.complete is False
    assert (resp.stop_reason, resp.native_stop_reason) == (S.ERROR, "gateway:stream_truncated")
    assert resp.cut is True
    # With [DONE] but still one choice unfinished: the [DONE] itself is the truncation.
    result = replay(join_events(kept), "openai")
    assert isinstance(result.events[-1], StreamError)
    assert result.events[-1].kind == "truncated"
    assert result.response.stop_reason is S.ERROR


def test_azure_first_chunk_with_empty_id_and_no_choices():
    result = run("openai_chat/vercel_ai__azure-model-router.chunks.jsonl")
    starts = [e for e in result.events if isinstance(e, MessageStart)]
    assert starts == [
        MessageStart("chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt", "gpt-5-nano-2025-08-07")
    ]
    resp = result.response
    assert (resp.id, resp.model) == (
        "chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt",
        "gpt-5-nano-2025-08-07",
    )
    assert resp.text == "Capital of Denmark."
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "stop")
    assert usage(resp) == (15, 78, 0, None, 64)
    assert_clean_end(resp)


def test_anthropic_compatible_stream_whose_first_tool_index_is_1():
    result = run("other/vercel_ai__openai-compatible-anthropic-fallback-tool-call.sse")
    assert [(e.index, e.id, e.name) for e in result.events if isinstance(e, ToolCallStart)] == [
        (0, "toolu_sanitized", "read_file")
    ]
    assert {e.index for e in result.events if isinstance(e, ToolCallDelta)} == {0}
    resp = result.response
    assert resp.text == "Reading it."
    assert calls(resp) == [
        (0, "toolu_sanitized", "read_file", '{"path": "a.txt"}', {"path": "a.txt"})
    ]
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_calls")
    assert_clean_end(resp)


def test_mistral_incremental_tool_call_keeps_the_first_name():
    result = run("other/vercel_ai__mistral-incremental-tool-call.chunks.jsonl")
    assert len([e for e in result.events if isinstance(e, ToolCallStart)]) == 1
    resp = result.response
    assert calls(resp) == [
        (
            0,
            "chatcmpl-tool-9f149c74c42f265b",
            "webSearchTool",
            '{"query": "current Berlin weather"}',
            {"query": "current Berlin weather"},
        )
    ]
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_calls")
    assert usage(resp) == (171, 14, 128, None, None)
    assert_clean_end(resp)


def test_groq_whole_tool_call_in_one_delta():
    result = run("other/vercel_ai__groq-tool-call.chunks.jsonl")
    tool_events = [e for e in result.events if isinstance(e, ToolCallStart | ToolCallDelta)]
    assert tool_events == [ToolCallStart(0, "tk85n1k4m", "weather"), ToolCallDelta(0, "{}")]
    resp = result.response
    assert calls(resp) == [(0, "tk85n1k4m", "weather", "{}", {})]
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_calls")
    assert usage(resp)[:2] == (210, 15)
    assert_clean_end(resp)


def test_deepseek_reasoning_content_becomes_thinking():
    resp = run("other/vercel_ai__deepseek-tool-call.chunks.jsonl").response
    assert resp.thinking == (
        "The user is asking for the weather in San Francisco. I need to use the weather tool to "
        "get this information. Let me invoke the weather tool with the location parameter set "
        'to "San Francisco".'
    )
    assert resp.text == ""
    assert calls(resp) == [
        (
            0,
            "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF",
            "weather",
            '{"location": "San Francisco"}',
            {"location": "San Francisco"},
        )
    ]
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_calls")
    assert usage(resp) == (339, 83, 320, None, 39)
    assert_clean_end(resp)


# --- Anthropic Messages --------------------------------------------------------------------------


def test_anthropic_tool_use_with_empty_first_partial_json():
    result = run("anthropic/anthropic_sdk__tool_use_response.sse")
    resp = result.response
    assert resp.text == "I'll check the current weather in Paris for you."
    assert calls(resp) == [
        (
            0,
            "toolu_01NRLabsLyVHZPKxbKvkfSMn",
            "get_weather",
            '{"location": "Paris"}',
            {"location": "Paris"},
        )
    ]
    assert resp.tool_calls[0].parse_failure is None
    deltas = [e.arguments for e in result.events if isinstance(e, ToolCallDelta)]
    assert deltas == ['{"locati', 'on": "P', "ar", 'is"}']  # the empty first one is dropped
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_use")
    assert usage(resp) == (377, 65, 0, 0, None)
    # The recorded body ends right after message_stop's data line: close() delivers it.
    assert not stream_body("anthropic/anthropic_sdk__tool_use_response.sse").endswith(b"\n")
    assert_clean_end(resp)


def test_anthropic_incomplete_partial_json_at_max_tokens(caplog):
    caplog.set_level(logging.WARNING, logger="gateway.aggregate")
    resp = run("anthropic/anthropic_sdk__incomplete_partial_json_response.sse").response
    raw = (
        '{"filename": "taxes.txt", "lines_of_text": [\n"# COMPREHENSIVE TAX GUIDE FOR '
        'INDIVIDUALS WITH MULTIPLE W-2s",\n"",\n"## INTRODUCTION",\n"",\n"Filing taxes'
    )
    assert resp.text.startswith("I'll create a comprehensive tax guide")
    assert resp.text.endswith("Let me do that for you now.")
    assert len(resp.tool_calls) == 1
    call = resp.tool_calls[0]
    assert (call.id, call.name) == ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file")
    assert call.arguments == raw  # kept exactly, though no content_block_stop ever came
    assert call.parsed is None
    failure = call.parse_failure
    assert failure is not None
    assert (failure.tool_index, failure.error_class, failure.offset, failure.length) == (
        0,
        "JSONDecodeError",
        149,
        149,
    )
    assert (resp.stop_reason, resp.native_stop_reason) == (S.LENGTH, "max_tokens")
    assert resp.cut is True
    assert usage(resp)[:2] == (450, 124)
    assert_clean_end(resp)
    warnings = [r for r in caplog.records if r.name == "gateway.aggregate"]
    assert len(warnings) == 1
    assert "Filing" not in warnings[0].getMessage()


def test_anthropic_refusal_with_stop_details():
    resp = run("anthropic/anthropic_sdk__refusal_response.sse").response
    assert (resp.stop_reason, resp.native_stop_reason) == (S.REFUSAL, "refusal")
    assert resp.stop_details == {
        "type": "refusal",
        "category": "cyber",
        "explanation": "This request was refused due to policy.",
    }
    assert resp.text == ""
    assert resp.tool_calls == []
    assert usage(resp)[:2] == (20, 0)
    assert resp.cut is False
    assert_clean_end(resp)


def test_anthropic_refusal_stream_without_content_blocks():
    resp = run("anthropic/vercel_ai__anthropic-refusal.chunks.jsonl").response
    assert (resp.stop_reason, resp.native_stop_reason) == (S.REFUSAL, "refusal")
    assert resp.stop_details is not None
    assert resp.stop_details["category"] == "cyber"
    assert resp.stop_details["recommended_model"] == "claude-fable-5"
    assert usage(resp)[:2] == (18, 5)
    assert_clean_end(resp)


def test_anthropic_clear_thinking():
    resp = run("anthropic/vercel_ai__anthropic-clear-thinking.1.chunks.jsonl").response
    assert resp.thinking == (
        "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185"
    )
    assert resp.thinking_signature is not None
    assert resp.thinking_signature.startswith("EvQBCkYICxgCKkAxhD4NUKFzudtZ6NzbZdEi")
    assert resp.thinking_signature.endswith("Ca17BgB")
    assert resp.text == "925 ÷ 5 = 185"
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "end_turn")
    assert usage(resp) == (69, 53, 0, 0, None)
    assert_clean_end(resp)


def test_anthropic_duplicate_message_start_is_ignored():
    name = "anthropic/vercel_ai__duplicate-message-start.chunks.jsonl"
    lines = payload_lines(name)
    assert lines[0] == lines[1]
    result = run(name)
    single = replay(rebuild([lines[0], *lines[2:]], "anthropic"), "anthropic")
    assert summary(result.response) == summary(single.response)
    assert result.events == single.events
    assert len([e for e in result.events if isinstance(e, MessageStart)]) == 1
    resp = result.response
    assert resp.text == "Hello, World!"
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "end_turn")
    assert usage(resp)[:2] == (17, 227)
    assert_clean_end(resp)


SPLICED = "anthropic/vercel_ai__spliced-message-start.chunks.jsonl"


def test_anthropic_spliced_message_start_is_a_protocol_error():
    result = run(SPLICED)
    error = result.events[-1]
    assert isinstance(error, StreamError)
    assert error.kind == "protocol"
    resp = result.response
    assert resp.error is error
    assert resp.complete is False
    assert (resp.stop_reason, resp.native_stop_reason) == (S.ERROR, "gateway:protocol")
    assert resp.cut is True
    assert resp.id == "msg_first"
    assert resp.thinking == "I will call the tool."  # nothing of the second attempt
    assert [(c.id, c.arguments) for c in resp.tool_calls] == [("toolu_first", '{"value":"Spark')]


def test_anthropic_spliced_stream_stays_broken_when_fed_to_the_end(caplog):
    """A replay that keeps feeding after the restart (as a naive recorded-file replay would)
    must not turn the broken stream into a clean TOOL_CALLS answer with the second attempt's
    blocks appended: once broken, the response stays cut."""
    caplog.set_level(logging.ERROR, logger="gateway.aggregate")
    resp = run(SPLICED, stop_at_end=False).response
    assert resp.error is not None
    assert resp.error.kind == "protocol"
    assert resp.complete is False
    assert resp.stop_reason is S.ERROR
    assert resp.cut is True
    assert "Let me call the tool." not in resp.thinking
    assert [c.id for c in resp.tool_calls] == ["toolu_first"]


def test_anthropic_message_delta_input_tokens_replace_message_start():
    result = run("anthropic/vercel_ai__anthropic-message-delta-input-tokens.chunks.jsonl")
    assert [e for e in result.events if isinstance(e, Usage)] == [
        Usage(input_tokens=43, output_tokens=1),
        Usage(input_tokens=61, output_tokens=2),
    ]
    resp = result.response
    assert usage(resp) == (61, 2, None, None, None)
    assert resp.text == "pong"
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "end_turn")
    assert_clean_end(resp)


def test_anthropic_json_tool_stream():
    resp = run("anthropic/vercel_ai__anthropic-json-tool.1.chunks.jsonl").response
    expected = {
        "elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]
    }
    raw = '{"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}'
    assert calls(resp) == [(0, "toolu_01KFbKqPYSuAKujiL6mTfzYA", "json", raw, expected)]
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_use")
    assert usage(resp) == (849, 47, 0, 0, None)
    assert_clean_end(resp)


# --- Non-streaming bodies ------------------------------------------------------------------------


def test_openai_body_with_tool_call():
    result = replay_body(load_json("openai_chat/envoy__chat-tools.response.json"), "openai")
    resp = result.response
    assert calls(resp) == [
        (
            0,
            "call_8fxy20OEu9ulvvaa5b5CzVA4",
            "get_current_weather",
            '{"location":"Boston, MA","unit":"fahrenheit"}',
            {"location": "Boston, MA", "unit": "fahrenheit"},
        )
    ]
    assert resp.text == ""
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_calls")
    assert usage(resp) == (162, 287, 0, None, 256)
    assert (resp.id, resp.model) == (
        "chatcmpl-C4GmWI2Sl7HnrQsKorSAZkJy94dpT",
        "gpt-5-nano-2025-08-07",
    )
    assert_clean_end(resp)


def test_anthropic_body_with_tool_use():
    body = load_json("anthropic/vercel_ai__anthropic-json-tool.1.json")
    resp = replay_body(body, "anthropic").response
    assert len(resp.tool_calls) == 1
    call = resp.tool_calls[0]
    assert (call.index, call.id, call.name) == (0, "toolu_01Q9ExVZnzZj7E2QQYHYtNUa", "json")
    assert call.parsed == body["content"][0]["input"]
    assert call.parsed["elements"][3] == {
        "location": "Berlin",
        "temperature": -9,
        "condition": "snowy",
    }
    assert orjson.loads(call.arguments) == call.parsed
    assert (resp.stop_reason, resp.native_stop_reason) == (S.TOOL_CALLS, "tool_use")
    assert usage(resp) == (1151, 87, 0, 0, None)
    assert_clean_end(resp)


@pytest.mark.parametrize(
    ("name", "details"),
    [
        ("anthropic/vercel_ai__anthropic-refusal.json", "cyber"),
        ("anthropic/vercel_ai__anthropic-refusal-no-details.json", None),
    ],
)
def test_anthropic_refusal_body(name, details):
    resp = replay_body(load_json(name), "anthropic").response
    assert (resp.stop_reason, resp.native_stop_reason) == (S.REFUSAL, "refusal")
    if details is None:
        assert resp.stop_details is None
    else:
        assert resp.stop_details is not None
        assert resp.stop_details["category"] == details
    assert resp.text == ""
    assert resp.tool_calls == []
    assert usage(resp)[:2] == (18, 5)
    assert resp.cut is False
    assert_clean_end(resp)


# --- Streams that end without their terminator --------------------------------------------------


def test_anthropic_stream_without_message_stop_is_truncated():
    body = stream_body("anthropic/anthropic_sdk__tool_use_response.sse")
    assert split_events(body)[-1].startswith(b"event: message_stop")
    result = replay(drop_last_events(body, 1), "anthropic")
    assert kinds(result.events)[-3:] == ["Stop", "Usage", "StreamError"]
    error = result.events[-1]
    assert isinstance(error, StreamError)
    assert error.kind == "truncated"
    resp = result.response
    assert resp.complete is False
    assert resp.terminator_seen is False
    # The message_delta said tool_use, but without message_stop the stream is cut.
    assert (resp.stop_reason, resp.native_stop_reason) == (S.ERROR, "gateway:stream_truncated")
    assert resp.cut is True
    assert resp.tool_calls[0].parsed == {"location": "Paris"}


def test_anthropic_stream_cut_mid_tool_call_is_truncated():
    body = stream_body("anthropic/anthropic_sdk__tool_use_response.sse")
    result = replay(drop_last_events(body, 5), "anthropic")  # cut after the "P fragment
    assert isinstance(result.events[-1], StreamError)
    assert result.events[-1].kind == "truncated"
    resp = result.response
    assert resp.stop_reason is S.ERROR
    assert resp.tool_calls[0].arguments == '{"location": "P'
    assert resp.tool_calls[0].parse_failure is not None


def test_openai_stream_without_finish_reason_is_truncated():
    body = stream_body("openai_chat/openai_python__text_stream_usage.sse")
    result = replay(drop_last_events(body, 3), "openai")  # no finish, usage or [DONE]
    error = result.events[-1]
    assert isinstance(error, StreamError)
    assert error.kind == "truncated"
    assert not any(isinstance(e, Stop) for e in result.events)
    resp = result.response
    assert resp.complete is False
    assert (resp.stop_reason, resp.native_stop_reason) == (S.ERROR, "gateway:stream_truncated")
    assert resp.text.endswith("a weather app.")


def test_openai_tool_stream_without_finish_reason_is_truncated():
    body = stream_body("openai_chat/openai_python__parallel_tool_calls_stream.sse")
    result = replay(drop_last_events(body, 3), "openai")
    assert isinstance(result.events[-1], StreamError)
    assert result.events[-1].kind == "truncated"
    assert result.response.stop_reason is S.ERROR
    assert len(result.response.tool_calls) == 2


def test_openai_stream_with_finish_reason_but_no_done_is_complete():
    body = stream_body("openai_chat/openai_python__text_stream_usage.sse")
    result = replay(drop_last_events(body, 1), "openai")  # only [DONE] is missing
    assert result.events[-1] == StreamEnd(terminator_seen=False)
    resp = result.response
    assert resp.complete is True
    assert resp.terminator_seen is False
    assert resp.error is None
    assert (resp.stop_reason, resp.native_stop_reason) == (S.STOP, "stop")
    assert usage(resp)[:2] == (14, 30)
    assert resp.cut is False


def test_eof_after_the_terminator_adds_nothing():
    for name in (
        "anthropic/anthropic_sdk__tool_use_response.sse",
        "openai_chat/openai_python__text_stream_usage.sse",
    ):
        result = run(name)
        assert isinstance(result.events[-1], StreamEnd)
        assert result.events[-1].terminator_seen is True
