"""Honest recovery of a stream cut after its first byte ([recovery] mid_stream = "continue"),
through every client format (the real SDKs) and every upstream wire, on a raw-socket upstream
that resets, stalls, sends its wire's error event or closes without the terminator.

A stream reset at 40% of its text is continued by the same target (its retry table allows a
second attempt): the client gets the exact text once, in one stream, ending as a complete
answer; the `gateway` object and the record say `recovered`; the continuation request carries
the text sent as an assistant prefill (Anthropic) or as an assistant turn and a request to go on
(every other wire). What is never continued: a break inside a tool call.
"""

from __future__ import annotations

import pytest

from tests.recovery_support import (
    AFTER_SPACE,
    AT,
    CLIENTS,
    COMPLETE,
    TEXT,
    WIRES,
    RecoveryStack,
    data_objects,
    expected_continuation,
    last_turns,
    raw_stream,
)
from tests.recovery_upstream import INPUT_TOKENS, Stream

CELLS = [(client, wire) for client in CLIENTS for wire in WIRES]


@pytest.fixture(scope="module")
def rstack(tmp_path_factory: pytest.TempPathFactory):
    s = RecoveryStack(tmp_path_factory.mktemp("recovery"))
    s.start()
    yield s
    s.stop()


def pieces(text: str, size: int = 6) -> int:
    return -(-len(text) // size)


@pytest.mark.parametrize(("client", "wire"), CELLS)
def test_a_reset_at_40_percent_is_continued_with_the_exact_text(rstack, client, wire):
    model = rstack.scripted("rc", wire, Stream(TEXT, cut_at=AT), Stream(TEXT[AT:]))
    seen = CLIENTS[client](rstack, model)
    assert seen.error is None
    assert seen.text == TEXT  # once, in order, nothing lost and nothing twice
    assert seen.stop == COMPLETE[client]
    assert seen.endings == 1  # one finish reason (chat), one text block (messages): no seam
    recovered = {
        "breaks": 1,
        "max_tokens": 0,
        "at_chars": [AT],
        "targets": [f"{WIRES[wire]}/*"],
        "causes": ["connection_lost"],  # a reset: not a missing terminator
    }
    assert seen.gateway is not None and seen.gateway["recovered"] == recovered
    assert seen.gateway["truncated"] is False
    _first, continuation = rstack.requests(model)
    assert last_turns(continuation) == expected_continuation(wire, TEXT[:AT])
    record = rstack.record(model)
    assert record["recovered"] == recovered
    assert (record["stop_reason"], record["truncated"], record["error_class"]) == ("stop", 0, None)
    assert [(a["outcome"], a.get("continues")) for a in record["attempts"]] == [
        ("broken", None),
        ("answered", True),
    ]
    # Usage adds both attempts up (the first one's count, where its wire sent one mid-stream).
    assert record["output_tokens"] >= pieces(TEXT[AT:])
    if wire == "anthropic":  # message_start gives the input count before the break
        assert record["input_tokens"] == 2 * INPUT_TOKENS


@pytest.mark.parametrize(("client", "wire"), CELLS)
def test_a_break_inside_a_tool_call_is_never_continued(rstack, client, wire):
    model = rstack.scripted("rc", wire, Stream(TEXT, tool=True), Stream(TEXT))
    seen = CLIENTS[client](rstack, model)
    assert seen.error is not None or seen.stop not in (COMPLETE[client], "tool_calls", "tool_use")
    assert len(rstack.requests(model)) == 1  # no continuation was asked for
    record = rstack.record(model)
    assert record["recovered"] is None
    assert record["truncated"] == 1
    assert [call["name"] for call in record["withheld_tool_calls"]] == ["weather"]


@pytest.mark.parametrize("how", ["stall", "error", "eof"])
@pytest.mark.parametrize("wire", list(WIRES))
def test_every_kind_of_break_during_text_is_continued(rstack, how, wire):
    """An idle timeout, the wire's own error event, a clean close without the terminator."""
    model = rstack.scripted("rc", wire, Stream(TEXT, cut_at=AT, how=how), Stream(TEXT[AT:]))
    seen = CLIENTS["chat"](rstack, model)
    assert (seen.error, seen.text, seen.stop) == (None, TEXT, "stop")
    cause = {"stall": "upstream_timeout", "error": "upstream_error", "eof": "missing_terminator"}
    assert seen.gateway is not None and seen.gateway["recovered"]["causes"] == [cause[how]]
    assert rstack.record(model)["truncated"] == 0


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_target_that_refuses_the_prefill_falls_over_to_the_next(rstack, client):
    """The OpenAI target breaks; the Anthropic fallback refuses the prefill (400); the Gemini
    one continues."""
    model = rstack.scripted(
        "fb", "openai", Stream(TEXT, cut_at=AT), Stream("", status=400), Stream(TEXT[AT:])
    )
    seen = CLIENTS[client](rstack, model)
    assert (seen.error, seen.text) == (None, TEXT)
    wires = [request.wire for request in rstack.requests(model)]
    assert wires == ["openai", "anthropic", "gemini"]
    record = rstack.record(model)
    assert record["recovered"]["targets"] == ["gm/*"]
    assert [(a["provider"], a["outcome"], a.get("status")) for a in record["attempts"]] == [
        ("oa", "broken", 200),
        ("an", "error_status", 400),
        ("gm", "answered", 200),
    ]


def test_when_every_target_refuses_the_stream_ends_as_without_recovery(rstack):
    model = rstack.scripted("fb", "openai", Stream(TEXT, cut_at=AT), Stream("", status=400))
    seen = CLIENTS["chat"](rstack, model)
    assert seen.error is not None and seen.text == TEXT[:AT]
    assert [r.wire for r in rstack.requests(model)] == ["openai", "anthropic", "gemini", "openai"]
    record = rstack.record(model)
    assert (record["recovered"], record["truncated"]) == (None, 1)
    assert record["cut_reason"] == "connection_lost"


@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize(
    "repeat",
    [AT - 12, AT - 2, AT - 3, 0],
    ids=["the tail", "the cut word", "the cut word and its space", "the whole answer"],
)
def test_a_continuation_that_repeats_what_was_sent_is_trimmed(rstack, client, wire, repeat):
    model = rstack.scripted("rc", wire, Stream(TEXT, cut_at=AT), Stream(TEXT[repeat:]))
    seen = CLIENTS[client](rstack, model)
    assert seen.text == TEXT


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_prefill_leaves_out_the_trailing_space_and_the_continuation_its_leading_one(
    rstack, client
):
    """Anthropic refuses an assistant turn ending in whitespace: the prefill is "...the lazy",
    and the model's " dog, ..." goes on after the space the client has already."""
    cut = AFTER_SPACE
    model = rstack.scripted("rc", "anthropic", Stream(TEXT, cut_at=cut), Stream(" " + TEXT[cut:]))
    seen = CLIENTS[client](rstack, model)
    assert seen.text == TEXT
    assert last_turns(rstack.requests(model)[1])[-1] == ("assistant", TEXT[: cut - 1])


def test_a_continuation_cut_again_ends_the_stream_once_max_recoveries_is_reached(rstack):
    model = rstack.scripted(
        "rc", "openai", Stream(TEXT, cut_at=AT), Stream(TEXT[AT:], cut_at=20), Stream(TEXT)
    )
    seen = CLIENTS["chat"](rstack, model)
    assert seen.error is not None and seen.text == TEXT[: AT + 20]
    assert len(rstack.requests(model)) == 2  # max_recoveries = 1
    record = rstack.record(model)
    assert record["truncated"] == 1 and record["recovered"]["at_chars"] == [AT]
    assert [a["outcome"] for a in record["attempts"]] == ["broken", "broken"]
    rstack.upstream.script(model, Stream(TEXT, cut_at=AT), Stream(TEXT[AT:], cut_at=20))
    last = data_objects(raw_stream(rstack, "chat", model)[1])[-1]
    assert "error" in last and last["gateway"]["truncated"] is True  # the cut is shown as cut
    assert last["gateway"]["recovered"]["breaks"] == 1  # and what was mended before it


@pytest.mark.parametrize("wire", list(WIRES))
def test_off_leaves_the_cut_as_it_was(rstack, wire):
    model = rstack.scripted("off", wire, Stream(TEXT, cut_at=AT), Stream(TEXT[AT:]))
    seen = CLIENTS["chat"](rstack, model)
    assert seen.error is not None and seen.text == TEXT[:AT]
    assert len(rstack.requests(model)) == 1
    assert rstack.record(model)["recovered"] is None
