"""A stream's response objects carry the request's echo as encoded once (`echo_members`): they
encode, byte for byte, to what the object with the echo merged in encodes to, whatever the
output, the status and the echo; and a whole stream writes each of its objects so."""

from __future__ import annotations

import orjson
import pytest

from gateway.encode import ReplyTerms, responses_body
from gateway.encode.responses_body import echo_members, response_object
from gateway.encode.responses_stream import ResponsesWriter
from gateway.events import (
    MessageStart,
    RefusalDelta,
    Stop,
    StopReason,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.handlers.validation import ResponsesBody
from gateway.normalize.aggregate import ChunkAggregator
from gateway.normalize.truncation import judge
from gateway.translate.translation import ToolOrigin

AGENT_REQUEST = {
    "model": "m",
    "input": "hi",
    "instructions": "Tu es un agent. «Sois bref» \u2028 😀",
    "tools": [
        {"type": "function", "name": f"tool_{n}", "parameters": {"type": "object"}}
        for n in range(20)
    ],
    "metadata": {"session": "s1", "nested": {"a": [1, 2.5, None, True]}},
    "store": False,
    "max_output_tokens": 256,
    "temperature": 0.2,
}


def terms_for(request: dict | None, **fields) -> ReplyTerms:
    echo = ResponsesBody.model_validate(request).echo(request) if request is not None else {}
    return ReplyTerms(
        "01a243a2f6cc5b68693a9ee5",
        "provider",
        "client-model",
        "withhold",
        response_id="resp_" + "ab" * 16,
        echo=echo,
        **fields,
    )


USAGE = Usage(input_tokens=12, output_tokens=20, cache_read_tokens=3, reasoning_tokens=4)

ANSWERS = {
    "text": [TextDelta('Grüß dich "quoted" \\ 😀'), Stop(StopReason.STOP, "completed")],
    "cut_at_max_tokens": [
        TextDelta("half"),
        Stop(StopReason.LENGTH, "incomplete:max_output_tokens"),
    ],
    "tool_calls": [
        TextDelta("calling"),
        ToolCallStart(0, "call_1", "tool_1"),
        ToolCallDelta(0, '{"city":"Paris"}'),
        ToolCallStart(1, "call_2", "apply_patch"),
        ToolCallDelta(1, '{"input":"*** Begin Patch"}'),
        Stop(StopReason.TOOL_CALLS, "completed"),
    ],
    "cut_tool_call": [
        ToolCallStart(0, "call_1", "tool_1"),
        ToolCallDelta(0, '{"city":"Pa'),
        Stop(StopReason.LENGTH, "incomplete:max_output_tokens"),
    ],
    "reasoning": [
        ThinkingDelta("let me think", signature="sig-1"),
        TextDelta("answer"),
        Stop(StopReason.STOP, "completed"),
    ],
    "refusal": [RefusalDelta("I can't help with that."), Stop(StopReason.REFUSAL, "completed")],
    "failed": [TextDelta("par"), Stop(StopReason.ERROR, "failed")],
    "empty": [Stop(StopReason.STOP, "completed")],
}
REQUESTS = {
    "agent": AGENT_REQUEST,
    "plain": {"model": "m", "input": [{"role": "user", "content": "hi"}]},
    "none": None,
}
CUSTOM_TOOL = {"apply_patch": ToolOrigin("apply_patch", custom=True)}


def answered(events: list) -> tuple:
    agg = ChunkAggregator()
    for event in [MessageStart("up_1", "upstream-model"), *events, USAGE, StreamEnd(True)]:
        agg.handle(event)
    reason, native = agg.stop
    calls = [(call.id, call.name) for call in agg.tool_calls]
    return agg.final(), judge(reason, native, agg.error, calls, "withhold")


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(responses_body.time, "time", lambda: 1796431083.25)


LIFECYCLE = (b"event: response.created", b"event: response.in_progress")
TERMINAL = (b"event: response.completed", b"event: response.incomplete", b"event: response.failed")


@pytest.mark.parametrize("request_name", REQUESTS)
@pytest.mark.parametrize("status", ["in_progress", "completed", "incomplete", "failed"])
def test_a_response_object_with_its_echo_encoded_once_is_the_same_bytes(request_name, status):
    terms = terms_for(REQUESTS[request_name])
    _, verdict = answered(ANSWERS["text"])
    item = orjson.Fragment(b'{"id":"msg_1","type":"message","content":[]}')
    ended = status != "in_progress"
    fields = {
        "created_at": 1796431000,
        "incomplete_reason": "max_output_tokens" if status == "incomplete" else None,
        "error": {"code": "server_error", "message": "stopped"} if status == "failed" else None,
    }
    output = [item, {"type": "function_call", "call_id": "c1"}] if ended else []
    usage = USAGE if ended else None
    judged = verdict if ended else None
    echo = echo_members(terms)

    data = orjson.dumps(
        response_object(terms, status, output, usage, "", judged, echo=echo, **fields)
    )

    expected = response_object(terms, status, output, usage, "", judged, **fields)
    assert data == orjson.dumps(expected)


@pytest.mark.parametrize("request_name", REQUESTS)
@pytest.mark.parametrize("answer", ANSWERS)
def test_each_response_object_of_a_stream_carries_the_echo_after_the_usage(request_name, answer):
    terms = terms_for(REQUESTS[request_name], tools=CUSTOM_TOOL, encrypted_reasoning=True)
    response, verdict = answered(ANSWERS[answer])
    writer = ResponsesWriter(terms)
    live = [e for e in ANSWERS[answer] if not isinstance(e, Stop)]

    data = writer.feed(None, None, [MessageStart("up_1", "upstream-model"), *live])
    data += writer.end(verdict, response)

    blocks = [b for b in data.split(b"\n\n") if b.startswith(LIFECYCLE + TERMINAL)]
    objects = [orjson.loads(b.split(b"\ndata: ", 1)[1])["response"] for b in blocks]
    assert len(objects) == 3
    for obj in objects:
        keys = list(obj)
        after_usage = keys[keys.index("usage") + 1 :][: len(terms.echo)]
        assert after_usage == list(terms.echo)
        assert {key: obj[key] for key in terms.echo} == terms.echo
        assert len(keys) == len(set(keys))
