"""Rule 1 and rule 6: which turn outcomes run their tool calls, and the typed terminal results.

Every scenario runs through a real gateway (both truncation policies) in front of a scripted
loopback upstream, for each pair of client format and upstream wire; some also straight against
the upstream. A counting tool and counting hooks show what was run.
"""

from __future__ import annotations

import pytest

from gateway.events import CUT_STOP_REASONS
from gateway.formats.registry import WIRES
from gateway.formats.stop_reasons import ANTHROPIC_NATIVE, OPENAI_NATIVE
from gateway.loop import (
    AgentLoop,
    AssistantMessage,
    CompletionReason,
    ConnectionFailed,
    HTTPStatusError,
    LoopError,
    OpenAIChatClient,
    RefusedError,
    StopReason,
    StreamBroken,
    TruncatedError,
    TurnError,
)
from gateway.loop.reading import body_turn
from tests.conftest import free_port
from tests.loop_upstream import (
    NATIVE,
    PAIR_IDS,
    PAIRS,
    POLICIES,
    Counting,
    Fail,
    LoopStack,
    Say,
    read,
)
from tests.scenarios import Answer, Tool, anthropic_body, openai_body

R = CompletionReason


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


def loop_for(client, counting: Counting) -> AgentLoop:
    return AgentLoop(client, [counting.tool()], hooks=counting.hooks())


@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(
    ("stop", "normalized"),
    [(None, StopReason.TOOL_CALLS), ("stop", StopReason.STOP), ("unknown", StopReason.UNKNOWN)],
)
async def test_tool_calls_run_when_the_turn_ended_in_tool_calls_stop_or_unknown(
    stack, fmt, wire, via, stop, normalized
):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say(calls=[read("a.py")], stop=stop), Say("done"))
    counting = Counting()

    result = await loop_for(stack.client(fmt, via, model), counting).run("Read a.py")

    assert result.reason is R.COMPLETED and result.error is None
    assert result.text == "done"
    assert result.turns[0].stop_reason is normalized
    assert counting.runs == [{"path": "a.py"}]
    assert counting.reached == (1, 1, 1, 1)
    assert result.iterations[0].results[0].content == "contents of a.py"


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_an_unknown_native_stop_runs_the_calls_straight_from_a_provider(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, Say(calls=[read("a.py")], stop="unknown"), Say("done"))
    counting = Counting()

    result = await loop_for(stack.client(fmt, "direct", model), counting).run("Read a.py")

    assert result.turns[0].stop_reason is StopReason.UNKNOWN
    assert result.turns[0].native_stop_reason == "some_future_reason"
    assert result.reason is R.COMPLETED
    assert counting.reached == (1, 1, 1, 1)


def never_run_cases():
    # (wire-neutral stop, completion reason, error class, normalized stop per wire)
    yield "refused", R.REFUSED, RefusedError
    yield "context_window", R.TRUNCATED, TruncatedError


@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(("stop", "reason", "error"), list(never_run_cases()))
async def test_refusal_filter_and_context_window_never_run_their_calls(
    stack, fmt, wire, via, stop, reason, error
):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("I will", calls=[read("a.py")], stop=stop), Say("unused"))
    counting = Counting()

    result = await loop_for(stack.client(fmt, via, model), counting).run("Read a.py")

    assert result.reason is reason
    assert isinstance(result.error, error)
    assert result.error.turn is result.turns[-1]
    assert counting.reached == (0, 0, 0, 0)
    assert len(stack.requests(model)) == 1  # the loop ended on that turn
    assert not any(isinstance(m, AssistantMessage) and m.tool_calls for m in result.messages)
    assert result.iterations[0].results == ()


@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_refusal_and_content_filter_end_refused(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("", stop="refused"))

    result = await AgentLoop(stack.client(fmt, via, model)).run("Do something bad")

    expected = StopReason.CONTENT_FILTER if wire == "openai" else StopReason.REFUSAL
    assert result.turns[0].stop_reason is expected
    assert result.reason is R.REFUSED
    assert isinstance(result.error, RefusedError) and result.error.stop_reason is expected


# Through either gateway for every pair; straight to the upstream in its own wire.
BROKEN_CASES = [(f, w, via) for f, w in PAIRS for via in POLICIES] + [
    ("openai", "openai", "direct"),
    ("anthropic", "anthropic", "direct"),
]


@pytest.mark.parametrize(("fmt", "wire", "via"), BROKEN_CASES)
async def test_a_broken_stream_never_runs_the_calls_it_carried(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("Reading", calls=[read("a.py")], broken=True), Say("unused"))
    counting = Counting()

    client = stack.client(fmt, via, model, stream=True)
    result = await loop_for(client, counting).run("Read a.py")

    turn = result.turns[0]
    assert turn.stop_reason is StopReason.ERROR
    assert isinstance(turn.error, StreamBroken)
    if via != "withhold":  # the calls did arrive, complete: only the rule keeps them from running
        assert [(c.name, c.parsed) for c in turn.tool_calls] == [("read_file", {"path": "a.py"})]
    assert result.reason is R.ERROR
    assert isinstance(result.error, TurnError) and result.error.cause is turn.error
    assert counting.reached == (0, 0, 0, 0)
    assert len(stack.requests(model)) == 1


@pytest.mark.parametrize("via", [*POLICIES, "direct"])
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_an_http_error_is_an_error_turn(stack, fmt, via):
    model = stack.model_name(fmt)
    stack.upstream.script(model, Fail(503, "overloaded"))

    result = await AgentLoop(stack.client(fmt, via, model)).run("Hello")

    assert result.reason is R.ERROR
    assert isinstance(result.error, TurnError)
    cause = result.error.cause
    assert isinstance(cause, HTTPStatusError) and cause.status == 503
    assert result.turns[0].stop_reason is StopReason.ERROR


async def test_an_openai_error_finish_through_the_gateway_never_runs_the_calls(stack):
    model = stack.model_name("openai")
    stack.upstream.script(model, Say(calls=[read("a.py")], stop="error"))
    counting = Counting()

    result = await loop_for(stack.client("anthropic", "pass", model), counting).run("Read")

    assert result.reason is R.ERROR
    assert result.turns[0].native_stop_reason == "error"
    assert counting.reached == (0, 0, 0, 0)


async def test_an_unreachable_server_is_an_error_turn():
    url = f"http://127.0.0.1:{free_port()}/v1"
    async with OpenAIChatClient(url, None, "m") as client:
        result = await AgentLoop(client).run("Hello")
    assert result.reason is R.ERROR
    assert isinstance(result.error, TurnError)
    assert isinstance(result.error.cause, ConnectionFailed)


@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_stop_sequence_ends_completed(stack, fmt, via):
    model = stack.model_name("anthropic")
    stack.upstream.script(model, Say("One, two", stop="stop_sequence"))

    result = await AgentLoop(stack.client(fmt, via, model)).run("Count")

    assert result.turns[0].stop_reason is StopReason.STOP_SEQUENCE
    assert (result.reason, result.text) == (R.COMPLETED, "One, two")


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_paused_turn_is_sent_back_so_the_model_resumes(stack, fmt):
    model = stack.model_name("anthropic")
    stack.upstream.script(model, Say("Searching", stop="pause"), Say("Found it"))

    result = await AgentLoop(stack.client(fmt, "withhold", model)).run("Search")

    assert [t.stop_reason for t in result.turns] == [StopReason.PAUSE, StopReason.STOP]
    assert (result.reason, result.text) == (R.COMPLETED, "Found it")
    assert stack.requests(model)[1]["messages"][-1]["role"] == "assistant"


def test_completion_reasons_and_error_types():
    required = {"COMPLETED", "TRUNCATED", "ERROR", "MAX_TURNS", "INTERRUPTED", "REFUSED", "RUNAWAY"}
    assert required <= set(CompletionReason.__members__)
    types = {cls.type for cls in LoopError.__subclasses__()}
    assert {"runaway", "stalled", "refused", "truncated", "turn", "max_turns"} <= types
    assert len(types) == len(LoopError.__subclasses__())  # one stable string per class


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_cut_value_of_the_servers_table_is_cut_straight_from_a_provider(stack, fmt):
    """OpenAI-compatible servers say `model_length` (Mistral) for a full context window: the
    loop reads the gateway's own table, so the call is never run and the run ends TRUNCATED."""
    model = stack.model_name(fmt)
    stack.upstream.script(model, Say("I will", calls=[read("a.py")], stop="context_window"))
    counting = Counting()

    result = await loop_for(stack.client(fmt, "direct", model), counting).run("Read a.py")

    assert result.turns[0].stop_reason is StopReason.CONTEXT_WINDOW
    assert result.turns[0].native_stop_reason == NATIVE[fmt]["context_window"]
    assert result.reason is R.TRUNCATED
    assert counting.reached == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("wire", "native", "reason"),
    [("openai", n, r) for n, r in OPENAI_NATIVE.items()]
    + [("anthropic", n, r) for n, r in ANTHROPIC_NATIVE.items()],
)
def test_the_loop_reads_every_row_of_the_servers_stop_tables(wire, native, reason):
    body = openai_body if wire == "openai" else anthropic_body
    answer = Answer(text="x", tools=[Tool("c1", "read_file", "{}")], native_stop=native)
    turn = body_turn(WIRES[wire], body(answer, "m"))
    assert (turn.stop_reason, turn.native_stop_reason) == (reason, native)
    assert turn.truncated == (reason in CUT_STOP_REASONS)
