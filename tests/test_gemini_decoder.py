"""The Gemini wire decoder on the recorded Gemini streams and bodies, and on built ones.

Each recorded `*.chunks.jsonl` stream is rebuilt as Gemini sends it (`data: <line>` frames, no
terminator) and replayed through SSE decoder -> Gemini decoder -> ChunkAggregator, whole and at
every split point: the aggregated response must not change. Beside them: what each answer
decodes to (text, thoughts, minted tool-call ids, usage, stop), every row of the finish-reason
table and of the block reasons, a stream without finishReason, an error frame, and the Google
error body.
"""

from __future__ import annotations

import functools
import logging

import orjson
import pytest

from gateway.events import (
    MessageStart,
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
from gateway.formats import gemini, gemini_ids
from gateway.formats.registry import wire_for
from gateway.formats.sse import SSEFrame
from gateway.formats.stop_reasons import BLOCK_REASON_PREFIX, GEMINI_BLOCK_REASONS, GEMINI_NATIVE
from tests.fixtures_util import (
    chunked,
    load_json,
    payload_lines,
    replay,
    replay_body,
    stream_body,
    summary,
)
from tests.gemini_upstream import SIGNATURE, call, chunk, text, thought

FOLDER = "gemini/vercel_ai__google-"
STREAMS = [
    "text",
    "reasoning",
    "reasoning-gemini3",
    "tool-call",
    "tool-call-gemini3",
    "stream-tool-call-arguments",
    "stream-no-args-tool-call",
    "stream-tool-call-array-arguments-missing-terminal-function-call",
    "vertex-stream-tool-call-arguments-nested.1",
]
# Streams longer than this are split at every point within a few bytes of each frame's line
# ends (where the SSE decoder's state changes) and at a stride inside the JSON between them:
# every point of the 32 KB nested-arguments stream would take a minute and a half.
EVERY_POINT_LIMIT = 8000
NEAR_LINE_END = 3
STRIDE = 37


def name_of(stem: str) -> str:
    return f"{FOLDER}{stem}.chunks.jsonl"


@functools.cache
def baseline(stem: str) -> dict:
    return summary(replay(stream_body(name_of(stem)), "gemini").response)


def split_points(body: bytes) -> list[int]:
    if len(body) <= EVERY_POINT_LIMIT:
        return list(range(len(body) + 1))
    points = set(range(0, len(body) + 1, STRIDE))
    for position, byte in enumerate(body):
        if byte == 0x0A:
            points.update(range(position - NEAR_LINE_END, position + NEAR_LINE_END + 2))
    return sorted(p for p in points if 0 <= p <= len(body))


# --- the recorded streams --------------------------------------------------------------------


@pytest.mark.parametrize("stem", STREAMS)
def test_a_recorded_stream_decodes_the_same_at_every_split_point(stem):
    body = stream_body(name_of(stem))
    want = baseline(stem)
    assert want["complete"] is True and want["error"] is None
    for point in split_points(body):
        got = summary(replay(body, "gemini", chunked(body, [point])).response)
        assert got == want, f"split at byte {point}"


@pytest.mark.parametrize("stem", STREAMS)
def test_a_recorded_stream_decodes_the_same_fed_a_byte_at_a_time(stem):
    body = stream_body(name_of(stem))
    got = summary(replay(body, "gemini", [body[i : i + 1] for i in range(len(body))]).response)
    assert got == baseline(stem)


def test_the_recorded_text_stream():
    got = baseline("text")
    assert got["id"] == "bH6LaZW8Fp_3nsEPqtaSwQ4" and got["model"] == "gemini-3-pro-preview"
    assert got["text"] == 'There are **3** "r"s in strawberry.\n\nst**r**awbe**rr**y'
    assert (got["stop_reason"], got["native_stop_reason"]) == (StopReason.STOP, "STOP")
    # candidates 23 + thoughts 185 are the output; thoughts are the reasoning tokens
    assert got["usage"] == (9, 23 + 185, None, None, 185)
    assert got["tool_calls"] == [] and got["terminator_seen"] is False


def test_the_recorded_tool_call_stream_ends_with_stop_and_is_tool_calls():
    got = baseline("tool-call")
    assert (got["stop_reason"], got["native_stop_reason"]) == (StopReason.TOOL_CALLS, "STOP")
    [call_] = got["tool_calls"]
    signature = orjson.loads(payload_lines(name_of("tool-call"))[0])["candidates"][0]["content"][
        "parts"
    ][0]["thoughtSignature"]
    assert call_["id"] == gemini_ids.mint("b36LacjwM668nsEP2tbsgQQ", 0, signature)
    assert gemini_ids.read_signature(call_["id"]) == signature
    assert (call_["name"], call_["parsed"]) == ("weather", {"location": "San Francisco"})


def test_the_recorded_thoughts_are_thinking():
    got = baseline("stream-no-args-tool-call")
    assert got["thinking"].startswith("**Processing User Requests**")
    assert got["text"] == ""


def test_streamed_arguments_are_assembled_per_call():
    """Vertex's `willContinue` / `partialArgs` calls: one call each, whole arguments."""
    calls = baseline("stream-no-args-tool-call")["tool_calls"]
    assert [(c["name"], c["parsed"]) for c in calls] == [
        ("read_theme", {}),
        ("read_screen", {"id": "A"}),
        ("read_screen", {"id": "B"}),
        ("read_screen", {"id": "C"}),
    ]
    assert len({c["id"] for c in calls}) == 4
    calls = baseline("stream-tool-call-arguments")["tool_calls"]
    assert [c["parsed"] for c in calls] == [{"location": "Boston"}, {"location": "San Francisco"}]


def test_a_streamed_call_without_its_closing_part_is_closed_by_the_next_part():
    [call_] = baseline("stream-tool-call-array-arguments-missing-terminal-function-call")[
        "tool_calls"
    ]
    assert call_["parsed"] == {
        "operations": [
            {
                "action": "add",
                "description": "Fresh red apple",
                "itemid": "apple_001",
                "price": 0.5,
            },
            {
                "action": "add",
                "description": "Ripe yellow banana",
                "itemid": "banana_001",
                "price": 0.3,
            },
        ]
    }


def test_nested_streamed_arguments():
    [call_] = baseline("vertex-stream-tool-call-arguments-nested.1")["tool_calls"]
    recipe = call_["parsed"]["recipe"]
    assert recipe["name"] == "Lasagna"
    assert recipe["ingredients"][0] == {"amount": "16 oz", "name": "Lasagna noodles"}
    assert len(recipe["ingredients"]) == 10 and len(recipe["steps"]) == 10


def test_a_stream_cut_before_its_finish_reason_is_truncated():
    lines = payload_lines(name_of("tool-call"))
    body = b"".join(b"data: " + line + b"\n\n" for line in lines[:-1])
    got = replay(body, "gemini").response
    assert got.complete is False
    assert got.error is not None and got.error.kind == "truncated"
    assert got.stop_reason is StopReason.ERROR
    assert got.native_stop_reason == "gateway:stream_truncated"


# --- the recorded bodies -----------------------------------------------------------------------


@pytest.mark.parametrize("stem", ["text", "reasoning", "reasoning-gemini3"])
def test_a_recorded_text_body(stem):
    body = load_json(f"{FOLDER}{stem}.json")
    got = summary(replay_body(body, "gemini").response)
    assert got["text"] == body["candidates"][0]["content"]["parts"][0]["text"]
    assert got["stop_reason"] is StopReason.STOP and got["complete"] is True
    usage = body["usageMetadata"]
    output = usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
    assert got["usage"] == (9, output, None, None, usage["thoughtsTokenCount"])


@pytest.mark.parametrize("stem", ["tool-call", "tool-call-gemini3"])
def test_a_recorded_tool_call_body(stem):
    body = load_json(f"{FOLDER}{stem}.json")
    got = summary(replay_body(body, "gemini").response)
    part = body["candidates"][0]["content"]["parts"][0]
    [call_] = got["tool_calls"]
    assert call_["id"] == gemini_ids.mint(body["responseId"], 0, part["thoughtSignature"])
    assert (call_["name"], call_["parsed"]) == ("weather", {"location": "San Francisco"})
    assert got["stop_reason"] is StopReason.TOOL_CALLS


def test_the_same_calls_get_the_same_ids_streamed_or_whole():
    parts = [thought("plan"), call("weather", {"city": "Bern"}, SIGNATURE), call("time", {})]
    whole = replay_body(chunk(parts, "STOP"), "gemini").response
    frames = [chunk([part]) for part in parts] + [chunk([], "STOP")]
    body = b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames)
    streamed = replay(body, "gemini").response
    ids = [c.id for c in whole.tool_calls]
    assert ids == [c.id for c in streamed.tool_calls]
    assert len(set(ids)) == 2
    assert gemini_ids.read_signature(ids[0]) == SIGNATURE
    assert gemini_ids.read_signature(ids[1]) is None


def test_events_of_a_body_in_order():
    body = chunk([thought("hm", "c2ln"), text("Hi"), call("f", {"a": 1})], "STOP")
    events = gemini.response_events(body)
    assert [type(e) for e in events] == [
        MessageStart,
        ThinkingDelta,
        TextDelta,
        ToolCallStart,
        ToolCallDelta,
        Usage,
        Stop,
        StreamEnd,
    ]
    assert events[1] == ThinkingDelta("hm", "c2ln")
    assert events[4] == ToolCallDelta(0, '{"a":1}')


def test_usage_counts_cache_reads_and_thoughts():
    usage = gemini.usage_event(
        {
            "promptTokenCount": 100,
            "cachedContentTokenCount": 60,
            "candidatesTokenCount": 7,
            "thoughtsTokenCount": 20,
            "toolUsePromptTokenCount": 3,
        }
    )
    assert usage == Usage(
        input_tokens=103, output_tokens=27, cache_read_tokens=60, reasoning_tokens=20
    )
    assert gemini.usage_event({"trafficType": "ON_DEMAND"}) == Usage()
    assert not gemini.has_usage({"trafficType": "ON_DEMAND"})


# --- stop reasons --------------------------------------------------------------------------------


@pytest.mark.parametrize("native", [n for n in GEMINI_NATIVE if ":" not in n])
@pytest.mark.parametrize("called", [False, True], ids=["text", "after-a-call"])
def test_every_finish_reason_row(native, called):
    parts = [call("f", {})] if called else [text("x")]
    got = replay_body(chunk(parts, native), "gemini").response
    want = GEMINI_NATIVE[native]
    if called and want is StopReason.STOP:
        want = StopReason.TOOL_CALLS  # Gemini has no finish reason of its own for tool calls
    assert (got.stop_reason, got.native_stop_reason) == (want, native)
    assert got.complete is True


def test_an_unknown_finish_reason_is_unknown_never_stop():
    got = replay_body(chunk([text("x")], "SOMETHING_NEW"), "gemini").response
    assert (got.stop_reason, got.native_stop_reason) == (StopReason.UNKNOWN, "SOMETHING_NEW")


@pytest.mark.parametrize("reason", [*GEMINI_BLOCK_REASONS, "A_REASON_OF_THE_FUTURE"])
def test_a_blocked_prompt_is_a_content_filter(reason):
    body = {"promptFeedback": {"blockReason": reason}, "responseId": "r", "modelVersion": "m"}
    for got in (
        replay_body(body, "gemini").response,
        replay(b"data: " + orjson.dumps(body) + b"\n\n", "gemini").response,
    ):
        assert got.stop_reason is StopReason.CONTENT_FILTER
        assert got.native_stop_reason == BLOCK_REASON_PREFIX + reason
        assert got.complete is True and got.text == ""
    if reason in GEMINI_BLOCK_REASONS:
        assert GEMINI_NATIVE[BLOCK_REASON_PREFIX + reason] is StopReason.CONTENT_FILTER


def test_usage_after_the_finish_still_counts():
    frames = [chunk([text("a")], "STOP", usage=None), {"usageMetadata": {"promptTokenCount": 5}}]
    body = b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames)
    got = replay(body, "gemini").response
    assert got.complete is True and got.usage.input_tokens == 5


# --- errors --------------------------------------------------------------------------------------


def test_an_error_frame_ends_the_stream():
    frames = [
        chunk([text("partial")]),
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
    ]
    body = b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames)
    got = replay(body, "gemini").response
    assert got.complete is False and got.text == "partial"
    assert got.error == StreamError(
        "upstream_error", "The model is overloaded.", "UNAVAILABLE", 503
    )


def test_the_google_error_body_with_retry_info():
    body = load_json("gemini/vercel_ai__google-429-retry-info.json")
    error = wire_for("gemini").error_fields(body, {})
    assert error is not None
    assert (error.type, error.code, error.retry_after) == (
        "RESOURCE_EXHAUSTED",
        "RESOURCE_EXHAUSTED",
        "35",  # 34.4 s, rounded up to whole seconds
    )
    assert error.message == body["error"]["message"]
    assert wire_for("gemini").error_fields([body], {}) == error  # a list of one error object
    assert wire_for("gemini").error_fields({"nothing": 1}, {}) is None


@pytest.mark.parametrize(
    "frame",
    [b"[1, 2]", b'"text"', b'{"candidates": "no"}', b'{"candidates": [{"content": []}]}'],
)
def test_a_frame_of_the_wrong_shape_is_a_protocol_error(frame):
    with pytest.raises(ValueError):
        gemini.GeminiDecoder().decode(SSEFrame(None, frame))


@pytest.mark.parametrize(
    ("path", "value", "want"),
    [
        ("$.a", {"stringValue": "x"}, {"a": "x"}),
        ("$.a.b[1]", {"numberValue": 2}, {"a": {"b": [None, 2]}}),
        ("$['odd key']", {"boolValue": True}, {"odd key": True}),
        ("$.n", {"nullValue": "NULL_VALUE"}, {"n": None}),
    ],
)
def test_partial_args_paths(path, value, want):
    args: dict = {}
    gemini.set_path(args, path, value)
    assert args == want


def test_partial_string_values_are_appended():
    args: dict = {}
    for piece in ("Bos", "ton", ""):
        gemini.set_path(args, "$.city", {"stringValue": piece})
    assert args == {"city": "Boston"}


@pytest.mark.parametrize("path", ["", "$", "a.b", "$.a[x]", "$..a"])
def test_a_bad_json_path_is_a_protocol_error(path):
    with pytest.raises(ValueError):
        gemini.set_path({}, path, {"stringValue": "x"})


def test_a_parse_warning_never_quotes_arguments(caplog):
    body = chunk([{"functionCall": {"name": "f", "args": {"k": "SECRET-ARG"}}}], "STOP")
    with caplog.at_level(logging.DEBUG):
        replay_body(body, "gemini")
    assert "SECRET-ARG" not in caplog.text


# --- minted ids ------------------------------------------------------------------------------


@pytest.mark.parametrize("signature", [SIGNATURE, "AB+/", "A", "QUJD", "a_b-c"])
def test_a_minted_id_carries_its_signature_back(signature):
    call_id = gemini_ids.mint("resp", 3, signature)
    assert set(call_id) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
    restored = gemini_ids.read_signature(call_id)
    assert restored is not None
    assert restored.rstrip("=").translate(str.maketrans("-_", "+/")) == signature.rstrip(
        "="
    ).translate(str.maketrans("-_", "+/"))


@pytest.mark.parametrize(
    "call_id", ["toolu_01abc", "call_abc", "call_" + "x" * 24 + "_sQUJD", "call_" + "a" * 24]
)
def test_ids_the_gateway_did_not_sign_carry_no_signature(call_id):
    assert gemini_ids.read_signature(call_id) is None


def test_ids_are_stable_and_distinct():
    assert gemini_ids.mint("r", 0, None) == gemini_ids.mint("r", 0, None)
    assert gemini_ids.mint("r", 0, None) != gemini_ids.mint("r", 1, None)
    assert gemini_ids.mint("r", 0, None) != gemini_ids.mint("s", 0, None)


# PROTOCOLS.md §e.1, written out again, with google-genai 3.6.1's documented meanings of
# CONTINUATION, ESCALATION, PUP_LIMITED_DISABLED and TOO_MANY_TOOL_CALLS: the table says this.
S = StopReason
SPEC = {
    "STOP": S.STOP,
    "MAX_TOKENS": S.LENGTH,
    **dict.fromkeys(
        [
            "SAFETY",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "RECITATION",
            "IMAGE_RECITATION",
            "MODEL_ARMOR",
            "LANGUAGE",
            "ESCALATION",
            "PUP_LIMITED_DISABLED",
        ],
        S.CONTENT_FILTER,
    ),
    **dict.fromkeys(
        [
            "MALFORMED_FUNCTION_CALL",
            "UNEXPECTED_TOOL_CALL",
            "MALFORMED_RESPONSE",
            "MISSING_THOUGHT_SIGNATURE",
        ],
        S.MALFORMED,
    ),
    "CONTINUATION": S.LENGTH,
    "TOO_MANY_TOOL_CALLS": S.PAUSE,
    **dict.fromkeys(
        [
            "OTHER",
            "IMAGE_OTHER",
            "NO_IMAGE",
            "FINISH_REASON_UNSPECIFIED",
        ],
        S.UNKNOWN,
    ),
}
SPEC_BLOCK_REASONS = [
    "BLOCKED_REASON_UNSPECIFIED",
    "SAFETY",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "IMAGE_SAFETY",
    "MODEL_ARMOR",
    "JAILBREAK",
]


def test_the_table_is_the_protocols_table():
    blocks = {BLOCK_REASON_PREFIX + reason: S.CONTENT_FILTER for reason in SPEC_BLOCK_REASONS}
    assert dict(GEMINI_NATIVE) == {**SPEC, **blocks}
    assert wire_for("gemini").stop_reasons is GEMINI_NATIVE
