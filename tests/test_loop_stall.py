"""Rule 3: three consecutive stalled iterations (tool calls whose results are all errors) end
the run ERROR; the message says when every one of them was a refused cut response; a
non-stalled iteration resets the streak; a cancelled iteration never counts."""

from __future__ import annotations

import asyncio

import pytest

from gateway.loop import (
    ALL_REFUSED_SUFFIX,
    AgentLoop,
    CompletionReason,
    InterruptedLoopError,
    StalledError,
)
from tests.loop_upstream import PAIR_IDS, PAIRS, POLICIES, Counting, LoopStack, Say, read

R = CompletionReason
STALLED = (
    "Execution aborted: 3 consecutive tool-only iterations made no progress (all tool calls failed)"
)
REFUSED_SUFFIX = (
    " — each of those responses was cut off at max_tokens, and its tool calls were refused"
)


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


def ask(path: str) -> Say:
    return Say(calls=[read(path)])


def cut(path: str) -> Say:
    return Say("Reading", calls=[read(path)], stop="length")


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_three_iterations_of_failing_calls_end_the_run(stack, fmt, wire):
    model = stack.model_name(wire)
    stack.upstream.script(model, ask("a"), ask("b"), ask("c"), Say("unused"))
    counting = Counting(fail=True)

    result = await AgentLoop(stack.client(fmt, "withhold", model), [counting.tool()]).run("Go")

    assert result.reason is R.ERROR
    assert isinstance(result.error, StalledError)
    assert str(result.error) == STALLED
    assert not result.error.all_refused
    assert len(counting.runs) == 3 and len(stack.requests(model)) == 3
    assert [i.stalled for i in result.iterations] == [True, True, True]


@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_three_refused_cut_responses_say_so(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(model, cut("a"), cut("b"), cut("c"), Say("unused"))
    counting = Counting()

    loop = AgentLoop(stack.client(fmt, via, model), [counting.tool()], hooks=counting.hooks())
    result = await loop.run("Go")

    assert result.reason is R.ERROR
    assert isinstance(result.error, StalledError) and result.error.all_refused
    assert str(result.error) == STALLED + REFUSED_SUFFIX
    assert ALL_REFUSED_SUFFIX == REFUSED_SUFFIX
    assert counting.reached == (0, 0, 0, 0)
    assert len(stack.requests(model)) == 3


@pytest.mark.parametrize(
    "script",
    [
        [cut("a"), cut("b"), ask("c")],
        [ask("a"), cut("b"), cut("c")],
        [cut("a"), ask("b"), cut("c")],
    ],
    ids=["cut-cut-failed", "failed-cut-cut", "cut-failed-cut"],
)
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_streak_with_one_ordinary_failure_has_no_suffix(stack, fmt, script):
    model = stack.model_name("anthropic")
    stack.upstream.script(model, *script, Say("unused"))
    counting = Counting(fail=True)

    result = await AgentLoop(stack.client(fmt, "withhold", model), [counting.tool()]).run("Go")

    assert isinstance(result.error, StalledError)
    assert str(result.error) == STALLED
    assert not result.error.all_refused


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_productive_iteration_resets_the_streak(stack, fmt, wire):
    model = stack.model_name(wire)
    stack.upstream.script(model, ask("x"), ask("x2"), ask("ok"), ask("x3"), ask("x4"), Say("done"))
    counting = Counting(fail=("x", "x2", "x3", "x4"))

    loop = AgentLoop(stack.client(fmt, "withhold", model), [counting.tool()])
    result = await loop.run("Go")

    assert (result.reason, result.text) == (R.COMPLETED, "done")
    assert [i.stalled for i in result.iterations] == [True, True, False, True, True, False]


async def test_an_iteration_with_one_success_is_not_stalled(stack):
    model = stack.model_name("openai")
    stack.upstream.script(
        model,
        Say(calls=[read("missing"), read("a")]),
        Say(calls=[read("m2"), read("b")]),
        Say(calls=[read("m3"), read("c")]),
        Say("done"),
    )
    counting = Counting(fail=("missing", "m2", "m3"))

    result = await AgentLoop(stack.client("openai", "withhold", model), [counting.tool()]).run("Go")

    assert result.reason is R.COMPLETED
    assert [i.stalled for i in result.iterations] == [False, False, False, False]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_unknown_tools_and_invalid_arguments_are_failed_calls(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(
        model,
        Say(calls=[("no_such_tool", {})]),
        Say(calls=[("read_file", '{"path": ')]),
        Say(calls=[("read_file", {"wrong": 1})]),
        Say("unused"),
    )
    counting = Counting()

    client = stack.client(fmt, "direct", model, stream=True)  # a whole Anthropic body is parsed
    result = await AgentLoop(client, [counting.tool()]).run("Go")

    assert str(result.error) == STALLED
    contents = [i.results[0].content for i in result.iterations]
    assert contents[0].startswith("Unknown tool 'no_such_tool'")
    assert contents[1].startswith("Invalid arguments for tool 'read_file': JSONDecodeError")
    assert contents[2] == "Invalid arguments for tool 'read_file': missing required 'path'"
    assert counting.runs == []


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_cancelled_iteration_is_never_counted_as_stalled(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, ask("a"), ask("b"), ask("c"), Say("unused"))
    cancel = asyncio.Event()
    counting = Counting(fail=True)
    counting.on_run = lambda: len(counting.runs) == 3 and cancel.set()

    loop = AgentLoop(stack.client(fmt, "withhold", model), [counting.tool()])
    result = await loop.run("Go", cancel=cancel)

    assert result.reason is R.INTERRUPTED  # not the stall that three failures would make
    assert isinstance(result.error, InterruptedLoopError)
    assert len(counting.runs) == 3
