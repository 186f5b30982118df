"""The stop-reason tables of issue 2 and the truncation verdict."""

from __future__ import annotations

import orjson
import pytest

from gateway.events import CUT_STOP_REASONS, Stop, StopReason, StreamEnd, StreamError
from gateway.formats import anthropic_messages, openai_chat, openai_responses, stop_reasons
from gateway.formats.sse import SSEFrame
from gateway.formats.stop_reasons import (
    from_anthropic,
    from_openai,
    from_responses,
    to_anthropic,
    to_openai,
)
from gateway.normalize.aggregate import ChunkAggregator
from gateway.normalize.truncation import extension, judge

S = StopReason

# Issue 2, point 5: upstream native value -> normalized.
OPENAI_NATIVE = {
    "stop": S.STOP,
    "tool_calls": S.TOOL_CALLS,
    "function_call": S.TOOL_CALLS,
    "length": S.LENGTH,
    "content_filter": S.CONTENT_FILTER,
}
# OpenAI-compatible servers' own values (PROTOCOLS.md §d), read on the OpenAI wire.
OPENAI_COMPATIBLE = {
    "model_length": S.CONTEXT_WINDOW,
    "abort": S.ABORTED,
    "error": S.ERROR,
    "insufficient_system_resource": S.ERROR,
    "end_turn": S.STOP,
    "repetition": S.STOP,
}
ANTHROPIC_NATIVE = {
    "end_turn": S.STOP,
    "tool_use": S.TOOL_CALLS,
    "max_tokens": S.LENGTH,
    "stop_sequence": S.STOP_SEQUENCE,
    "refusal": S.REFUSAL,
    "pause_turn": S.PAUSE,
    "model_context_window_exceeded": S.CONTEXT_WINDOW,
}
# The Responses wire's native values, made from the terminal response (no finish reason there).
RESPONSES_NATIVE = {
    "completed": S.STOP,
    "incomplete:max_output_tokens": S.LENGTH,
    "incomplete:content_filter": S.CONTENT_FILTER,
    "incomplete:max_messages": S.PAUSE,
    "incomplete:steered": S.PAUSE,
    "failed": S.ERROR,
    "cancelled": S.ABORTED,
}
# Normalized -> what each client format sees (ERROR / ABORTED become error events instead).
TO_OPENAI = {
    S.STOP: "stop",
    S.TOOL_CALLS: "tool_calls",
    S.LENGTH: "length",
    S.STOP_SEQUENCE: "stop",
    S.CONTENT_FILTER: "content_filter",
    S.REFUSAL: "content_filter",
    S.PAUSE: "stop",
    S.CONTEXT_WINDOW: "length",
    S.MALFORMED: "stop",
}
TO_ANTHROPIC = {
    S.STOP: "end_turn",
    S.TOOL_CALLS: "tool_use",
    S.LENGTH: "max_tokens",
    S.STOP_SEQUENCE: "stop_sequence",
    S.CONTENT_FILTER: "refusal",
    S.REFUSAL: "refusal",
    S.PAUSE: "pause_turn",
    S.CONTEXT_WINDOW: "model_context_window_exceeded",
    S.MALFORMED: "end_turn",
}
CUT = {S.LENGTH, S.CONTEXT_WINDOW, S.ERROR, S.ABORTED}
UNKNOWN_NATIVES = ["weird_new_reason", "STOP", "Stop", "max_output_tokens", "repetition "]


def test_stop_reason_is_the_closed_set_of_the_design():
    assert {r.name for r in S} == {
        "STOP", "TOOL_CALLS", "LENGTH", "STOP_SEQUENCE", "CONTENT_FILTER", "REFUSAL", "PAUSE",
        "CONTEXT_WINDOW", "MALFORMED", "ERROR", "ABORTED", "UNKNOWN",
    }  # fmt: skip
    assert all(r.value == r.name.lower() for r in S)
    assert CUT_STOP_REASONS == CUT


@pytest.mark.parametrize(("native", "reason"), OPENAI_NATIVE.items())
def test_openai_native_values(native, reason):
    assert from_openai(native) is reason


@pytest.mark.parametrize(("native", "reason"), OPENAI_COMPATIBLE.items())
def test_openai_compatible_native_values(native, reason):
    assert from_openai(native) is reason


@pytest.mark.parametrize(("native", "reason"), OPENAI_COMPATIBLE.items())
def test_openai_compatible_values_through_the_stream_decoder(native, reason):
    decoder = openai_chat.OpenAIChatDecoder()
    chunk = b'{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"%s"}]}' % native.encode()
    stops = [e for e in decoder.decode(SSEFrame(None, chunk))[1] if isinstance(e, Stop)]
    assert [(e.reason, e.native) for e in stops] == [(reason, native)]


def test_the_tables_hold_exactly_these_rows():
    """A row added to a production table without a test here is a failure too."""
    assert dict(stop_reasons.OPENAI_NATIVE) == {**OPENAI_NATIVE, **OPENAI_COMPATIBLE}
    assert dict(stop_reasons.ANTHROPIC_NATIVE) == ANTHROPIC_NATIVE
    assert dict(stop_reasons.RESPONSES_NATIVE) == RESPONSES_NATIVE
    assert dict(stop_reasons.TO_OPENAI) == {**TO_OPENAI, S.UNKNOWN: "stop"}
    assert dict(stop_reasons.TO_ANTHROPIC) == {**TO_ANTHROPIC, S.UNKNOWN: "end_turn"}


@pytest.mark.parametrize(("native", "reason"), ANTHROPIC_NATIVE.items())
def test_anthropic_native_values(native, reason):
    assert from_anthropic(native) is reason


@pytest.mark.parametrize("native", [*UNKNOWN_NATIVES, "", None])
def test_unknown_native_values_are_unknown_never_stop(native):
    assert from_openai(native) is S.UNKNOWN
    assert from_anthropic(native) is S.UNKNOWN
    assert from_responses(native) is S.UNKNOWN


@pytest.mark.parametrize(("native", "reason"), RESPONSES_NATIVE.items())
def test_responses_native_values(native, reason):
    assert from_responses(native) is reason


def responses_body(native: str) -> dict:
    status, _, reason = native.partition(":")
    body = {"id": "r", "model": "m", "status": status, "output": []}
    if reason:
        body["incomplete_details"] = {"reason": reason}
    return body


# Every row through the body decoder (failed is a StreamError there: it carries the error).
@pytest.mark.parametrize(
    ("native", "reason"), [(n, r) for n, r in RESPONSES_NATIVE.items() if n != "failed"]
)
def test_responses_body_stop_reason_keeps_native(native, reason):
    stops = [
        e for e in openai_responses.response_events(responses_body(native)) if isinstance(e, Stop)
    ]
    assert [(s.reason, s.native) for s in stops] == [(reason, native)]


@pytest.mark.parametrize(
    ("native", "reason"),
    [(n, r) for n, r in RESPONSES_NATIVE.items() if ":" in n or n == "completed"],
)
def test_responses_stop_through_the_stream_decoder(native, reason):
    terminal = "response.incomplete" if native.startswith("incomplete") else "response.completed"
    data = orjson.dumps({"type": terminal, "response": responses_body(native)})
    events = openai_responses.OpenAIResponsesDecoder().decode(SSEFrame(terminal, data))[1]
    assert [(e.reason, e.native) for e in events if isinstance(e, Stop)] == [(reason, native)]
    assert isinstance(events[-1], StreamEnd)


@pytest.mark.parametrize("native", ["incomplete:weird_new_reason", "incomplete", "cancelled_x"])
def test_unknown_responses_values_stay_unknown_and_are_not_cut(native):
    events = openai_responses.response_events(responses_body(native))
    stops = [e for e in events if isinstance(e, Stop)]
    assert [(s.reason, s.native) for s in stops] == [(S.UNKNOWN, native)]


@pytest.mark.parametrize("native", UNKNOWN_NATIVES)
def test_unknown_openai_native_is_kept_through_the_decoder(native):
    decoder = openai_chat.OpenAIChatDecoder()
    agg = ChunkAggregator()
    chunk = (
        b'{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"hi"},'
        b'"finish_reason":"' + native.encode() + b'"}]}'
    )
    for data in (chunk, b"[DONE]"):
        for event in decoder.decode(SSEFrame(None, data))[1]:
            agg.handle(event)
    resp = agg.final()
    assert (resp.stop_reason, resp.native_stop_reason) == (S.UNKNOWN, native)
    assert resp.complete is True
    assert resp.cut is False


@pytest.mark.parametrize("native", UNKNOWN_NATIVES)
def test_unknown_anthropic_native_is_kept_through_the_decoder(native):
    decoder = anthropic_messages.AnthropicDecoder()
    agg = ChunkAggregator()
    delta = b'{"type":"message_delta","delta":{"stop_reason":"' + native.encode() + b'"}}'
    frames = [
        SSEFrame("message_start", b'{"type":"message_start","message":{"id":"m1","model":"x"}}'),
        SSEFrame("message_delta", delta),
        SSEFrame("message_stop", b'{"type":"message_stop"}'),
    ]
    for frame in frames:
        for event in decoder.decode(frame)[1]:
            agg.handle(event)
    resp = agg.final()
    assert (resp.stop_reason, resp.native_stop_reason) == (S.UNKNOWN, native)
    assert resp.cut is False


@pytest.mark.parametrize(("native", "reason"), OPENAI_NATIVE.items())
def test_openai_body_stop_reason_keeps_native(native, reason):
    body = {
        "id": "c",
        "model": "m",
        "choices": [{"message": {"content": "x"}, "finish_reason": native}],
    }
    stops = [e for e in openai_chat.response_events(body) if isinstance(e, Stop)]
    assert [(s.reason, s.native) for s in stops] == [(reason, native)]


@pytest.mark.parametrize(("native", "reason"), ANTHROPIC_NATIVE.items())
def test_anthropic_body_stop_reason_keeps_native(native, reason):
    body = {
        "id": "m",
        "model": "x",
        "content": [],
        "stop_reason": native,
        "stop_sequence": "###" if native == "stop_sequence" else None,
    }
    stops = [e for e in anthropic_messages.response_events(body) if isinstance(e, Stop)]
    assert [(s.reason, s.native) for s in stops] == [(reason, native)]
    if native == "stop_sequence":
        assert stops[0].stop_sequence == "###"


@pytest.mark.parametrize(("reason", "value"), TO_OPENAI.items())
@pytest.mark.parametrize("has_tool_calls", [False, True])
def test_to_openai(reason, value, has_tool_calls):
    assert to_openai(reason, has_tool_calls) == value


@pytest.mark.parametrize(("reason", "value"), TO_ANTHROPIC.items())
@pytest.mark.parametrize("has_tool_calls", [False, True])
def test_to_anthropic(reason, value, has_tool_calls):
    assert to_anthropic(reason, has_tool_calls, "###") == value


def test_unknown_goes_out_as_stop_or_tool_calls():
    assert to_openai(S.UNKNOWN, False) == "stop"
    assert to_openai(S.UNKNOWN, True) == "tool_calls"
    assert to_anthropic(S.UNKNOWN, False, None) == "end_turn"
    assert to_anthropic(S.UNKNOWN, True, None) == "tool_use"


def test_stop_sequence_without_the_matched_string_is_end_turn_for_anthropic():
    assert to_anthropic(S.STOP_SEQUENCE, False, "###") == "stop_sequence"
    assert to_anthropic(S.STOP_SEQUENCE, False, None) == "end_turn"


def test_every_non_error_reason_has_an_explicit_client_value():
    assert set(TO_OPENAI) | {S.UNKNOWN, S.ERROR, S.ABORTED} == set(S)
    assert set(TO_ANTHROPIC) | {S.UNKNOWN, S.ERROR, S.ABORTED} == set(S)


@pytest.mark.parametrize(
    "native",
    [*OPENAI_NATIVE],
)
def test_openai_round_trip_is_the_same_value(native):
    assert to_openai(from_openai(native), native in ("tool_calls", "function_call")) == (
        "tool_calls" if native == "function_call" else native
    )


@pytest.mark.parametrize("native", [*ANTHROPIC_NATIVE])
def test_anthropic_round_trip_is_the_same_value(native):
    assert to_anthropic(from_anthropic(native), native == "tool_use", "###") == native


# --- judge(): which responses are cut, and what becomes of their tool calls ----------------------

CALLS = [("call_1", "get_weather"), ("call_2", "get_time")]


@pytest.mark.parametrize("reason", list(S))
@pytest.mark.parametrize("policy", ["withhold", "pass"])
def test_judge_cuts_only_length_context_window_error_aborted(reason, policy):
    error = StreamError("truncated", "x") if reason in (S.ERROR, S.ABORTED) else None
    verdict = judge(reason, "native", error, CALLS, policy)
    cut = reason in CUT
    assert verdict.truncated is cut
    assert verdict.stop_reason is reason
    assert verdict.native_stop_reason == "native"
    assert verdict.tool_calls == tuple(CALLS)
    # a MALFORMED answer is not cut, but its calls are the provider's own unrunnable ones
    unrunnable = cut or reason is S.MALFORMED
    assert verdict.deliver_tool_calls is (not unrunnable or policy == "pass")
    assert verdict.withheld == (tuple(CALLS) if unrunnable and policy == "withhold" else ())
    assert verdict.delivered_tool_calls is (not unrunnable or policy == "pass")
    assert (verdict.cut_reason is not None) is cut


@pytest.mark.parametrize("policy", ["withhold", "pass"])
def test_unknown_is_never_cut(policy):
    for native in (None, "weird", "length_exceeded"):
        verdict = judge(S.UNKNOWN, native, None, CALLS, policy)
        assert verdict.truncated is False
        assert verdict.cut_reason is None
        assert verdict.deliver_tool_calls is True
        assert verdict.withheld == ()


def test_cut_reasons():
    def cut_reason(reason, error=None):
        return judge(reason, None, error, CALLS, "withhold").cut_reason

    assert cut_reason(S.LENGTH) == "length"
    assert cut_reason(S.CONTEXT_WINDOW) == "context_window"
    assert cut_reason(S.ERROR, StreamError("truncated", "x")) == "missing_terminator"
    assert cut_reason(S.ABORTED, StreamError("aborted", "x")) == "cancelled"
    assert cut_reason(S.ERROR, StreamError("timeout", "x")) == "upstream_timeout"
    assert cut_reason(S.ERROR, StreamError("upstream_error", "x", "overloaded_error")) == (
        "upstream_error"
    )


def test_a_cut_response_without_tool_calls_withholds_nothing():
    verdict = judge(S.LENGTH, "max_tokens", None, [], "withhold")
    assert verdict.truncated is True
    assert verdict.withheld == ()
    assert verdict.delivered_tool_calls is False


@pytest.mark.parametrize(
    ("reason", "native", "policy", "truncated", "withheld"),
    [
        (
            S.LENGTH,
            "max_tokens",
            "withhold",
            True,
            [{"id": "call_1", "name": "get_weather"}, {"id": "call_2", "name": "get_time"}],
        ),
        (S.LENGTH, "length", "pass", True, []),
        (S.TOOL_CALLS, "tool_use", "withhold", False, []),
        (S.UNKNOWN, "weird", "withhold", False, []),
        (
            S.CONTEXT_WINDOW,
            "model_context_window_exceeded",
            "withhold",
            True,
            [{"id": "call_1", "name": "get_weather"}, {"id": "call_2", "name": "get_time"}],
        ),
    ],
)
def test_extension_object(reason, native, policy, truncated, withheld):
    ext = extension(judge(reason, native, None, CALLS, policy), "anthropic", "req-1")
    assert ext["stop_reason"] == reason.value
    assert ext["stop_reason"] == ext["stop_reason"].lower()
    assert ext["native_stop_reason"] == native
    assert ext["provider"] == "anthropic"
    assert ext["request_id"] == "req-1"
    assert ext["truncated"] is truncated
    assert ext["withheld_tool_calls"] == withheld
    assert ("cut_reason" in ext) is truncated


def test_stream_end_after_stop_does_not_change_the_stop_reason():
    agg = ChunkAggregator()
    agg.handle(Stop(S.UNKNOWN, "weird"))
    agg.handle(StreamEnd(terminator_seen=True))
    resp = agg.final()
    assert (resp.stop_reason, resp.native_stop_reason, resp.cut) == (S.UNKNOWN, "weird", False)
