"""Logs never hold tool arguments, exception messages of JSON parsers, or keys.

A parse failure of tool-call arguments logs exactly one WARNING naming the exception class, the
offset and the length; no captured record (message, args, extra fields) holds the argument text.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import openai
import orjson
import pytest

from gateway.events import Stop, StopReason, StreamEnd, ToolCallDelta, ToolCallStart
from gateway.logs import JsonFormatter
from gateway.normalize.aggregate import ChunkAggregator
from tests.conftest import UPSTREAM_ANTHROPIC_KEY, UPSTREAM_OPENAI_KEY, openai_client
from tests.fixtures_util import replay
from tests.scenarios import Answer, Tool, script_for
from tests.upstream import Script

TOKEN = "sk-SECRET-TOKEN-123"
CUT = '{"key": "' + TOKEN + '", "note": "cut he'
INVALID = '{"key": "' + TOKEN + '" oops}'
SECRETS = (TOKEN, UPSTREAM_OPENAI_KEY, UPSTREAM_ANTHROPIC_KEY, "sk-client")


def exception_for(raw: str) -> orjson.JSONDecodeError:
    with pytest.raises(orjson.JSONDecodeError) as info:
        orjson.loads(raw)
    return info.value


def record_texts(record: logging.LogRecord) -> list[str]:
    """Every text a handler or formatter could take from the record."""
    texts = [record.getMessage(), str(record.msg), repr(record.args)]
    texts += [repr(value) for value in record.__dict__.values()]
    if record.exc_info:
        texts.append(logging.Formatter().formatException(record.exc_info))
    return texts


def assert_no_secret(caplog: pytest.LogCaptureFixture, secrets: tuple[str, ...]) -> None:
    for record in caplog.records:
        for text in record_texts(record):
            for secret in secrets:
                assert secret not in text, (record.name, record.levelname, secret)
    for secret in secrets:
        assert secret not in caplog.text


def aggregate(arguments: list[str]) -> Any:
    agg = ChunkAggregator()
    agg.handle(ToolCallStart(0, "call_1", "lookup"))
    for piece in arguments:
        agg.handle(ToolCallDelta(0, piece))
    agg.handle(Stop(StopReason.LENGTH, "length"))
    agg.handle(StreamEnd(terminator_seen=True))
    return agg.final()


@pytest.mark.parametrize(
    ("raw", "pieces"),
    [
        (CUT, [CUT[:12], CUT[12:20], CUT[20:]]),  # the token split across deltas
        (INVALID, [INVALID]),
    ],
    ids=["cut", "invalid"],
)
def test_parse_failure_warning_names_class_offset_length_only(caplog, raw, pieces):
    caplog.set_level(logging.DEBUG)
    exc = exception_for(raw)
    # What must stay out of the log is really in what the parser gives: its `doc` holds the text.
    assert TOKEN in exc.doc
    resp = aggregate(pieces)
    call = resp.tool_calls[0]
    assert call.arguments == raw
    assert call.parsed is None
    failure = call.parse_failure
    assert failure is not None
    assert (failure.error_class, failure.offset, failure.length) == (
        "JSONDecodeError",
        exc.pos,
        len(raw),
    )
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert warnings[0].levelno == logging.WARNING
    assert "JSONDecodeError" in message
    assert str(exc.pos) in message
    assert str(len(raw)) in message
    assert str(exc) not in message  # the parser's own message is never logged
    assert warnings[0].exc_info is None
    # The structured fields a JSON log line carries: the class, the offset and the length.
    fields = vars(warnings[0])
    assert (fields["error_class"], fields["offset"], fields["length"]) == (
        "JSONDecodeError",
        exc.pos,
        len(raw),
    )
    line = orjson.loads(JsonFormatter().format(warnings[0]))
    assert (line["error_class"], line["offset"], line["length"], line["tool_index"]) == (
        "JSONDecodeError",
        exc.pos,
        len(raw),
        0,
    )
    assert_no_secret(caplog, (TOKEN, raw[:20]))


def test_parse_failure_through_a_wire_stream(caplog):
    caplog.set_level(logging.DEBUG)
    chunks = [
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "lookup", "arguments": ""}}]}, "finish_reason": None}]},
        *[
            {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": CUT[i : i + 6]}}]},
                "finish_reason": None}]}
            for i in range(0, len(CUT), 6)
        ],
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {},
                                                 "finish_reason": "length"}]},
    ]  # fmt: skip
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    resp = replay(body, "openai").response
    assert resp.stop_reason is StopReason.LENGTH
    assert resp.tool_calls[0].arguments == CUT
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert f"offset {exception_for(CUT).pos}, length {len(CUT)}" in warnings[0].getMessage()
    assert_no_secret(caplog, (TOKEN,))


def test_valid_arguments_log_nothing(caplog):
    caplog.set_level(logging.DEBUG)
    resp = aggregate(['{"key": "', TOKEN, '"}'])
    assert resp.tool_calls[0].parsed == {"key": TOKEN}
    assert [r for r in caplog.records if r.name.startswith("gateway")] == []


def test_end_to_end_exchange_logs_no_secret(stack, upstream, unique_model, caplog):
    caplog.set_level(logging.DEBUG)
    model = unique_model("oa")
    answer = Answer(
        text="Looking it up", tools=[Tool("call_secret", "lookup", CUT)], native_stop="length"
    )
    upstream.script(model, script_for("openai", answer, model, stream=False))
    client = openai_client(stack)
    completion = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "find the key"}]
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "length"
    assert not choice.message.tool_calls  # withheld: cut
    # The upstream really received the gateway's key, and answered with the token.
    assert upstream.last(model).headers.get("Authorization") == f"Bearer {UPSTREAM_OPENAI_KEY}"
    warnings = [r for r in caplog.records if r.name == "gateway.aggregate"]
    assert len(warnings) == 1
    assert warnings[0].getMessage() == (
        "tool call arguments are not valid JSON: JSONDecodeError at offset "
        f"{exception_for(CUT).pos}, length {len(CUT)}"
    )
    assert_no_secret(caplog, SECRETS)


def test_end_to_end_streaming_exchange_logs_no_secret(stack, upstream, unique_model, caplog):
    caplog.set_level(logging.DEBUG)
    model = unique_model("an")
    answer = Answer(
        text="Looking it up", tools=[Tool("toolu_secret", "lookup", CUT)], native_stop="max_tokens"
    )
    upstream.script(model, script_for("anthropic", answer, model, stream=True))
    client = openai_client(stack)
    chunks = list(
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "find the key"}], stream=True
        )
    )
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length"
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert upstream.last(model).headers.get("x-api-key") == UPSTREAM_ANTHROPIC_KEY
    assert_no_secret(caplog, SECRETS)


def test_upstream_error_gets_a_json_warning_with_class_and_status(
    stack, upstream, unique_model, caplog
):
    """An upstream failure is one warning naming the error class and status, never its text."""
    model = unique_model("oa")
    body = b'{"error": {"message": "boom sk-SECRET-TOKEN-123", "type": "server_error"}}'
    upstream.script(model, Script(status=503, body=body))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(openai.InternalServerError):
        openai_client(stack).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}]
        )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not _upstream_warnings(caplog):
        time.sleep(0.02)
    (warning,) = _upstream_warnings(caplog)
    assert warning.getMessage() == "upstream error: UpstreamStatusError (HTTP 503)"
    assert (warning.error_class, warning.http_status, warning.provider) == (
        "UpstreamStatusError",
        503,
        "openai",
    )
    assert "sk-SECRET-TOKEN-123" not in caplog.text


def _upstream_warnings(caplog):
    return [
        r for r in caplog.records if r.name == "gateway.exchange" and r.levelno == logging.WARNING
    ]
