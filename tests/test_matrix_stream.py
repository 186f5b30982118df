"""Conformance matrix, streaming: every client format x upstream wire pair (issue 2).

Same scenarios as test_matrix_whole.py, streamed, plus what only a stream can do: an upstream
error mid-stream, a stream that just stops (no terminator), and an OpenAI stream that finished
every choice but never sent `[DONE]` (complete, not cut). Broken streams are checked twice:
through the SDK (it raises its APIError after the text arrived) and as raw bytes (the stream
ends with the format's own error event, and the HTTP response itself is properly finished).
"""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tests.conftest import openai_client
from tests.scenarios import Answer, openai_chunks, script_for
from tests.test_matrix_support import (
    CUT_CASES,
    CUT_IDS,
    PAIR_IDS,
    PAIRS,
    PREFIX,
    ROW_CASES,
    ROW_IDS,
    TEXT,
    check_error_ending,
    check_extension,
    check_tools,
    drive,
    one_tool,
    raw_stream,
    run_cut,
    run_row,
    run_text,
    run_tools,
    text_of,
    two_tools,
)
from tests.upstream import Script, openai_sse

STREAM = True
PARTIAL = "Partial answer, then trouble: ü€😀"


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_text(stack, upstream, unique_model, client, wire):
    seen = run_text(stack, upstream, unique_model, client, wire, STREAM)
    if client == "openai":
        assert seen.stream_kinds[-1] in ("finish", "usage")
    else:
        assert seen.stream_kinds[-1] == "message_stop"


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_one_tool_call(stack, upstream, unique_model, client, wire):
    run_tools(stack, upstream, unique_model, client, wire, STREAM, one_tool(wire))


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_two_parallel_tool_calls(stack, upstream, unique_model, client, wire):
    run_tools(
        stack, upstream, unique_model, client, wire, STREAM, two_tools(wire), text="Checking."
    )


@pytest.mark.parametrize("wire", ["openai", "anthropic"], ids=["oa-wire", "an-wire"])
def test_openai_sdk_stream_helper_final_completion(stack, upstream, unique_model, wire):
    """`client.chat.completions.stream(...).get_final_completion()`, the helper the OpenAI SDK
    documents, folds the gateway's stream into the upstream's tool calls."""
    model = unique_model(PREFIX[wire])
    tools = two_tools(wire)
    upstream.script(model, script_for(wire, Answer(text="ok", tools=tools), model, True))
    with openai_client(stack).chat.completions.stream(
        model=model, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.content == "ok"
    got = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]
    assert got == [(t.id, t.name, json.loads(t.arguments)) for t in tools]


@pytest.mark.parametrize(("client", "row"), ROW_CASES, ids=ROW_IDS)
def test_stop_reason_row(stack, upstream, unique_model, client, row):
    run_row(stack, upstream, unique_model, client, row, STREAM)


@pytest.mark.parametrize(("client", "wire", "policy", "both"), CUT_CASES, ids=CUT_IDS)
def test_cut_tool_call(stack, upstream, unique_model, client, wire, policy, both):
    seen = run_cut(stack, upstream, unique_model, client, wire, policy, both, STREAM)
    if client == "anthropic" and policy == "withhold":
        assert "content_block_start" in seen.stream_kinds  # the text block
        assert seen.stream_kinds[-1] == "message_stop"


def check_sdk_broken(seen, client: str) -> None:
    """The SDK raised its own error after the text had arrived, and saw no normal finish."""
    if client == "openai":
        assert isinstance(seen.error, openai.APIError), seen.error
        assert "finish" not in seen.stream_kinds
    else:
        assert isinstance(seen.error, anthropic.APIError), seen.error
        assert "message_delta" not in seen.stream_kinds
        assert "message_stop" not in seen.stream_kinds
    assert seen.text == PARTIAL


BROKEN_CASES = [
    pytest.param(client, wire, kind, id=f"{client}-client<-{wire}-wire-{kind}")
    for client, wire in PAIRS
    for kind in ("error-mid-stream", "no-terminator")
]


def broken_answer(kind: str) -> Answer:
    if kind == "error-mid-stream":
        return Answer(text=PARTIAL, error_mid=True)
    return Answer(text=PARTIAL, terminator=False)


@pytest.mark.parametrize(("client", "wire", "kind"), BROKEN_CASES)
def test_broken_stream_sdk(stack, upstream, unique_model, client, wire, kind):
    seen = drive(stack, upstream, unique_model, client, wire, broken_answer(kind), stream=True)
    check_sdk_broken(seen, client)


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_broken_stream_with_tool_call_withholds_it(stack, upstream, unique_model, client, wire):
    """A stream that stops before its terminator, after a complete-looking tool call: cut, so
    under withhold the call is not delivered and the stream ends with the error event."""
    tools = one_tool(wire)
    answer = Answer(text=PARTIAL, tools=tools, terminator=False)
    seen = drive(stack, upstream, unique_model, client, wire, answer, stream=True)
    check_sdk_broken(seen, client)
    assert seen.tools == []


@pytest.mark.parametrize(("client", "wire", "kind"), BROKEN_CASES)
def test_broken_stream_raw(stack, upstream, unique_model, client, wire, kind):
    model = unique_model(PREFIX[wire])
    upstream.script(model, script_for(wire, broken_answer(kind), model, stream=True))
    frames = raw_stream(stack, client, model)
    check_error_ending(frames, client)
    assert text_of(frames, client) == PARTIAL


@pytest.mark.parametrize(("client", "wire"), PAIRS, ids=PAIR_IDS)
def test_upstream_connection_dropped_mid_stream(stack, upstream, unique_model, client, wire):
    """The upstream socket dies after a few frames: the client still gets an error event."""
    model = unique_model(PREFIX[wire])
    script = script_for(wire, Answer(text=TEXT), model, stream=True)
    script.drop_after = 4
    upstream.script(model, script)
    frames = raw_stream(stack, client, model)
    check_error_ending(frames, client)
    assert TEXT.startswith(text_of(frames, client))


OPENAI_NO_DONE = [
    pytest.param(client, tools, id=f"{client}-client-{'tool' if tools else 'text'}")
    for client in ("openai", "anthropic")
    for tools in (False, True)
]


@pytest.mark.parametrize(("client", "with_tools"), OPENAI_NO_DONE)
def test_openai_wire_finish_without_done_is_complete(
    stack, upstream, unique_model, client, with_tools
):
    """finish_reason arrived, `[DONE]` did not: complete, not cut (issue 2, point 5)."""
    tools = one_tool("openai") if with_tools else []
    answer = Answer(text=TEXT, tools=tools)
    seen = drive(
        stack,
        upstream,
        unique_model,
        client,
        "openai",
        answer,
        stream=True,
        script=lambda model: Script(chunks=openai_sse(openai_chunks(answer, model), done=False)),
    )
    assert seen.error is None, seen.error
    assert seen.text == TEXT
    native = "tool_calls" if with_tools else "stop"
    if client == "openai":
        assert seen.stop == native
        assert seen.native == native
    else:
        assert seen.stop == ("tool_use" if with_tools else "end_turn")
        assert seen.stream_kinds[-1] == "message_stop"
    check_tools(seen, tools, client)
    check_extension(seen, stop=native, native=native, wire="openai", truncated=False, stream=True)


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_openai_wire_finish_without_done_raw(stack, upstream, unique_model, client):
    model = unique_model("oa")
    answer = Answer(text=TEXT)
    upstream.script(model, Script(chunks=openai_sse(openai_chunks(answer, model), done=False)))
    frames = raw_stream(stack, client, model)
    assert text_of(frames, client) == TEXT
    if client == "openai":
        assert all("error" not in f.json for f in frames if f.data != "[DONE]")
        finishes = [
            c["finish_reason"]
            for f in frames
            if f.data != "[DONE]"
            for c in f.json.get("choices") or ()
            if c.get("finish_reason")
        ]
        assert finishes == ["stop"]
    else:
        assert [f.event for f in frames][-2:] == ["message_delta", "message_stop"]
        assert "error" not in [f.event for f in frames]
