"""The loop's two wire codecs without a network: history encoding, stop-reason tables, the
`gateway` extension, stream folding at every split point, broken streams, error bodies."""

from __future__ import annotations

import pytest

from gateway.formats.registry import ANTHROPIC, OPENAI
from gateway.formats.sse import SSEDecoder
from gateway.loop import (
    AgentLoop,
    AssistantMessage,
    CompletionReason,
    HTTPStatusError,
    ModelRequest,
    StopReason,
    StreamBroken,
    ToolCall,
    ToolResult,
    Turn,
    TurnError,
    UserMessage,
    WithheldCall,
)
from gateway.loop import Tool as LoopTool
from gateway.loop import anthropic_messages as anthropic_wire
from gateway.loop import openai_chat as openai_wire
from gateway.loop.http import error_turn
from gateway.loop.reading import TurnStream, body_turn
from tests.scenarios import Answer, Tool, anthropic_events, openai_chunks
from tests.upstream import anthropic_sse, openai_sse

S = StopReason
GOOD = ToolCall.from_json("c1", "read_file", '{"path": "a.py"}')
BAD = ToolCall.from_json("c2", "read_file", '{"path": "a.p')
HISTORY = [
    UserMessage("Read two files"),
    AssistantMessage("Reading", (GOOD, BAD)),
    ToolResult("c1", "read_file", "print('hi')"),
    ToolResult("c2", "read_file", "Invalid arguments", is_error=True),
    UserMessage("Thanks, now summarize"),
]


def test_openai_history():
    assert openai_wire.encode_messages(HISTORY, "Be brief") == [
        {"role": "system", "content": "Be brief"},
        {"role": "user", "content": "Read two files"},
        {
            "role": "assistant",
            "content": "Reading",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "print('hi')"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: Invalid arguments"},
        {"role": "user", "content": "Thanks, now summarize"},
    ]


def test_anthropic_history_groups_tool_results_in_one_user_message():
    assert anthropic_wire.encode_messages(HISTORY) == [
        {"role": "user", "content": [{"type": "text", "text": "Read two files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading"},
                {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "c2", "name": "read_file", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": "print('hi')",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": "Invalid arguments",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks, now summarize"},
            ],
        },
    ]


def test_request_bodies_carry_tools_system_and_limits():
    async def run(args: dict) -> str:
        return ""

    tool = LoopTool("read_file", "Read", {"type": "object"}, run)
    request = ModelRequest([UserMessage("Hi")], [tool], "Be brief")
    oa = openai_wire.OpenAIChatCodec().request_body(request, "m", 99, stream=True)
    assert (oa["max_completion_tokens"], oa["stream"], oa["tools"][0]["function"]["name"]) == (
        99,
        True,
        "read_file",
    )
    an = anthropic_wire.AnthropicMessagesCodec().request_body(request, "m", 99, stream=False)
    assert (an["max_tokens"], an["system"], an["tools"][0]["input_schema"]) == (
        99,
        "Be brief",
        {"type": "object"},
    )
    assert "stream" not in an


def openai_body(finish, gateway=None, calls=()):
    message = {"role": "assistant", "content": "hi", "tool_calls": list(calls) or None}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if gateway is not None:
        body["gateway"] = gateway
    return body


def anthropic_body(stop, gateway=None):
    body = {"content": [{"type": "text", "text": "hi"}], "stop_reason": stop}
    if gateway is not None:
        body["gateway"] = gateway
    return body


@pytest.mark.parametrize(
    ("native", "expected"),
    [
        ("stop", S.STOP),
        ("length", S.LENGTH),
        ("tool_calls", S.TOOL_CALLS),
        ("function_call", S.TOOL_CALLS),
        ("content_filter", S.CONTENT_FILTER),
        ("some_future_reason", S.UNKNOWN),
        (None, S.UNKNOWN),
    ],
)
def test_openai_native_finish_reasons(native, expected):
    turn = body_turn(OPENAI, openai_body(native))
    assert (turn.stop_reason, turn.native_stop_reason) == (expected, native)
    assert turn.truncated == (expected is S.LENGTH)


@pytest.mark.parametrize(
    ("native", "expected"),
    [
        ("end_turn", S.STOP),
        ("tool_use", S.TOOL_CALLS),
        ("max_tokens", S.LENGTH),
        ("stop_sequence", S.STOP_SEQUENCE),
        ("refusal", S.REFUSAL),
        ("pause_turn", S.PAUSE),
        ("model_context_window_exceeded", S.CONTEXT_WINDOW),
        ("some_future_reason", S.UNKNOWN),
    ],
)
def test_anthropic_native_stop_reasons(native, expected):
    turn = body_turn(ANTHROPIC, anthropic_body(native))
    assert (turn.stop_reason, turn.native_stop_reason) == (expected, native)
    assert turn.truncated == (expected in (S.LENGTH, S.CONTEXT_WINDOW))


def test_the_gateway_extension_wins_over_the_client_formats_value():
    ext = {
        "stop_reason": "context_window",
        "native_stop_reason": "model_context_window_exceeded",
        "truncated": True,
        "withheld_tool_calls": [{"id": "toolu_1", "name": "read_file"}],
    }
    for turn in (
        body_turn(OPENAI, openai_body("length", ext)),
        body_turn(ANTHROPIC, anthropic_body("model_context_window_exceeded", ext)),
    ):
        assert turn.stop_reason is S.CONTEXT_WINDOW
        assert turn.native_stop_reason == "model_context_window_exceeded"
        assert turn.truncated
        assert turn.withheld_tool_calls == (WithheldCall("toolu_1", "read_file"),)
        assert turn.announced_calls == (WithheldCall("toolu_1", "read_file"),)


def test_a_stop_value_the_loop_does_not_know_stays_unknown():
    turn = body_turn(OPENAI, openai_body("stop", {"stop_reason": "brand_new"}))
    assert turn.stop_reason is S.UNKNOWN


ANSWER = Answer(
    text="Reading both",
    tools=[Tool("t1", "read_file", '{"path": "a.py"}'), Tool("t2", "read_file", '{"path": "b"}')],
)
EXPECTED_CALLS = (
    ToolCall.from_json("t1", "read_file", '{"path": "a.py"}'),
    ToolCall.from_json("t2", "read_file", '{"path": "b"}'),
)


def fold(wire, data: bytes, split: int) -> Turn:
    stream = TurnStream(wire)
    for piece in (data[:split], data[split:]):
        stream.feed(piece)
    return stream.final()


def test_an_openai_stream_folds_the_same_at_every_split_point():
    data = b"".join(openai_sse(openai_chunks(ANSWER, "m")))
    for split in range(len(data) + 1):
        turn = fold(OPENAI, data, split)
        assert (turn.text, turn.tool_calls) == ("Reading both", EXPECTED_CALLS)
        assert (turn.stop_reason, turn.native_stop_reason, turn.error) == (
            S.TOOL_CALLS,
            "tool_calls",
            None,
        )


def test_an_anthropic_stream_folds_the_same_at_every_split_point():
    data = b"".join(anthropic_sse(anthropic_events(ANSWER, "m")))
    for split in range(0, len(data) + 1, 3):
        turn = fold(ANTHROPIC, data, split)
        assert (turn.text, turn.tool_calls) == ("Reading both", EXPECTED_CALLS)
        assert (turn.stop_reason, turn.native_stop_reason) == (S.TOOL_CALLS, "tool_use")


@pytest.mark.parametrize(
    ("wire", "frames"),
    [
        (OPENAI, openai_sse(openai_chunks(ANSWER, "m")[:-2], done=False)),
        (ANTHROPIC, anthropic_sse(anthropic_events(ANSWER, "m")[:-2])),
    ],
    ids=["openai", "anthropic"],
)
def test_a_stream_without_its_terminator_is_a_failed_turn_that_keeps_what_arrived(wire, frames):
    turn = fold(wire, b"".join(frames), 0)
    assert turn.stop_reason is S.ERROR and turn.truncated
    assert isinstance(turn.error, StreamBroken)
    assert turn.tool_calls == EXPECTED_CALLS


def test_error_events_carry_their_type_and_the_gateway_object():
    ext = b'"gateway": {"stop_reason": "error", "native_stop_reason": null, "truncated": true}'
    openai_error = b'data: {"error": {"message": "boom", "type": "server_error"}, ' + ext + b"}\n\n"
    turn = fold(OPENAI, openai_error, 0)
    assert isinstance(turn.error, StreamBroken) and turn.error.error_type == "server_error"
    anthropic_error = (
        b"event: error\ndata: "
        b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
    )
    turn = fold(ANTHROPIC, anthropic_error, 0)
    assert isinstance(turn.error, StreamBroken) and turn.error.error_type == "overloaded_error"
    assert turn.error.message == "Overloaded"


@pytest.mark.parametrize(
    ("body", "error_type", "message"),
    [
        (
            b'{"error": {"message": "slow down", "type": "rate_limit_error"}}',
            "rate_limit_error",
            "slow down",
        ),
        (
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}',
            "overloaded_error",
            "busy",
        ),
        (b"<html>bad gateway</html>", None, "HTTP 429"),
    ],
)
def test_error_bodies_become_typed_failed_turns(body, error_type, message):
    turn = error_turn(429, body)
    assert turn.stop_reason is S.ERROR
    assert isinstance(turn.error, HTTPStatusError)
    assert (turn.error.status, turn.error.error_type, turn.error.message) == (
        429,
        error_type,
        message,
    )


def test_a_parse_error_names_the_class_and_offset_never_the_text():
    call = ToolCall.from_json("c", "login", '{"password": "hunter2')
    assert call.parsed is None
    assert call.parse_error is not None and call.parse_error.startswith("JSONDecodeError at offset")
    assert "hunter2" not in call.parse_error
    assert ToolCall.from_json("c", "f", "[1]").parse_error == "the arguments are not a JSON object"
    assert ToolCall.from_json("c", "f", "").parsed == {}


def test_the_loop_reads_crlf_comments_and_multiline_data_with_the_gateways_decoder():
    chunk = b'{"id": "c", "choices": [{"index": 0, "delta": {"content": "hi"}}]}'
    finish = b'{"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}'
    data = (
        b": keep-alive\r\n\r\ndata: "
        + chunk[:11]  # split at whitespace: the two data lines join with a newline
        + b"\r\ndata: "
        + chunk[11:]
        + b"\r\n\r\ndata: "
        + finish
        + b"\n\r\ndata: [DONE]\n\n"
    )
    turn = fold(OPENAI, data, 0)
    assert (turn.text, turn.stop_reason, turn.error) == ("hi", S.STOP, None)


def test_the_loop_and_the_server_agree_on_a_blank_line_made_of_lf_then_crlf():
    """`data: a\\n\\r\\ndata: b\\n\\n` is two events (the line ends \\n, then an empty line
    ends \\r\\n): the loop reads them with the server's own decoder."""
    frames = SSEDecoder().feed(b"data: a\n\r\ndata: b\n\n")
    assert [f.data for f in frames] == [b"a", b"b"]
    first = b'{"id": "c", "choices": [{"index": 0, "delta": {"content": "a"}}]}'
    second = b'{"id": "c", "choices": [{"index": 0, "delta": {"content": "b"}, '
    second += b'"finish_reason": "stop"}]}'
    turn = fold(OPENAI, b"data: " + first + b"\n\r\ndata: " + second + b"\n\ndata: [DONE]\n\n", 0)
    assert (turn.text, turn.stop_reason) == ("ab", S.STOP)


class Scripted:
    """The whole test double for the model seam: one method."""

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)

    async def complete(self, request: ModelRequest) -> Turn:
        return self.turns.pop(0)


@pytest.mark.parametrize("stop", [S.MALFORMED, S.ABORTED, S.ERROR])
async def test_malformed_aborted_and_error_turns_never_run_their_calls(stop):
    ran = []

    async def run(args: dict) -> str:
        ran.append(args)
        return "ran"

    turn = Turn("", (GOOD,), stop, "native")
    result = await AgentLoop(Scripted(turn), [LoopTool("read_file", "", {}, run)]).run("Go")

    assert result.reason is CompletionReason.ERROR
    assert isinstance(result.error, TurnError) and result.error.cause is None
    assert ran == []
