"""Rule 5: `max_turns = N` admits exactly N model turns, checked only when a turn's own ending
would continue the loop; wall clock and cancellation are checked before it; a cancellation ends
the run INTERRUPTED."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from gateway.loop import (
    CANCELLED_RESULT,
    AgentLoop,
    CallInterrupted,
    CompletionReason,
    InterruptedLoopError,
    Limits,
    MaxTurnsError,
    RefusedError,
    Tool,
    WallClockError,
)
from tests.loop_upstream import PAIR_IDS, PAIRS, Counting, LoopStack, Say, read

R = CompletionReason


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


def distinct_calls(n: int) -> list[Say]:
    return [Say(calls=[read(f"{k}.py")]) for k in range(n)]


@pytest.mark.parametrize("max_turns", [1, 3])
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_max_turns_admits_exactly_n_model_turns(stack, fmt, wire, max_turns):
    model = stack.model_name(wire)
    stack.upstream.script(model, *distinct_calls(10))
    counting = Counting()

    loop = AgentLoop(
        stack.client(fmt, "withhold", model),
        [counting.tool()],
        limits=Limits(max_turns=max_turns),
    )
    result = await loop.run("Read everything")

    assert result.reason is R.MAX_TURNS
    assert isinstance(result.error, MaxTurnsError) and result.error.max_turns == max_turns
    assert len(stack.requests(model)) == max_turns
    assert len(counting.runs) == max_turns  # the last turn's calls ran: its ending continued


@pytest.mark.parametrize(
    ("last", "reason"),
    [
        (Say("done"), R.COMPLETED),
        (Say("cut off in the mid", stop="length"), R.TRUNCATED),
        (Say("", stop="refused"), R.REFUSED),
    ],
    ids=["final-answer", "cut-answer", "refusal"],
)
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_turn_that_ends_the_loop_on_the_last_allowed_turn_keeps_its_result(
    stack, fmt, wire, last, reason
):
    model = stack.model_name(wire)
    stack.upstream.script(model, *distinct_calls(2), last)

    loop = AgentLoop(
        stack.client(fmt, "withhold", model), [Counting().tool()], limits=Limits(max_turns=3)
    )
    result = await loop.run("Read")

    assert result.reason is reason
    assert not isinstance(result.error, MaxTurnsError)
    if reason is R.REFUSED:
        assert isinstance(result.error, RefusedError)
    assert len(stack.requests(model)) == 3


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_refused_cut_response_on_the_last_turn_continues_so_it_hits_the_limit(stack, fmt):
    model = stack.model_name("anthropic")
    stack.upstream.script(model, Say("Reading", calls=[read()], stop="length"), Say("unused"))

    loop = AgentLoop(
        stack.client(fmt, "pass", model), [Counting().tool()], limits=Limits(max_turns=1)
    )
    result = await loop.run("Read")

    assert result.reason is R.MAX_TURNS
    assert len(stack.requests(model)) == 1


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_cancellation_before_the_start_sends_nothing(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, Say("unused"))
    cancel = asyncio.Event()
    cancel.set()

    result = await AgentLoop(stack.client(fmt, "withhold", model)).run("Hi", cancel=cancel)

    assert result.reason is R.INTERRUPTED
    assert isinstance(result.error, InterruptedLoopError)
    assert stack.requests(model) == [] and result.iterations == ()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_cancellation_during_a_model_call_interrupts_it(stack, fmt, wire, stream):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("too late", delay=10))
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, cancel.set)
    started = time.monotonic()

    client = stack.client(fmt, "withhold", model, stream=stream)
    result = await AgentLoop(client).run("Hi", cancel=cancel)

    assert time.monotonic() - started < 2
    assert result.reason is R.INTERRUPTED
    assert isinstance(result.turns[0].error, CallInterrupted)


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_cancellation_is_checked_before_max_turns(stack, fmt, wire):
    model = stack.model_name(wire)
    stack.upstream.script(model, *distinct_calls(5))
    cancel = asyncio.Event()
    counting = Counting()
    counting.on_run = lambda: len(counting.runs) == 2 and cancel.set()

    loop = AgentLoop(
        stack.client(fmt, "withhold", model), [counting.tool()], limits=Limits(max_turns=2)
    )
    result = await loop.run("Read", cancel=cancel)

    assert result.reason is R.INTERRUPTED
    assert len(stack.requests(model)) == 2


def tool_running(function) -> Tool:
    return Tool("read_file", "Read a file", {"type": "object"}, function)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_the_wall_clock_is_checked_before_max_turns(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, *distinct_calls(5))

    async def stubborn(args: dict) -> str:
        """Finishes its work even when cancelled, so the deadline passes while it runs."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.2)
        return "finished anyway"

    limits = Limits(max_turns=1, wall_clock=0.1)
    loop = AgentLoop(stack.client(fmt, "withhold", model), [tool_running(stubborn)], limits=limits)
    result = await loop.run("Read")

    assert result.iterations[0].results[0].content == "finished anyway"
    assert result.reason is R.TIMED_OUT
    assert isinstance(result.error, WallClockError)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_the_wall_clock_interrupts_a_slow_tool(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, *distinct_calls(5))

    async def slow(args: dict) -> str:
        await asyncio.sleep(10)
        return "too late"

    loop = AgentLoop(
        stack.client(fmt, "withhold", model), [tool_running(slow)], limits=Limits(wall_clock=0.1)
    )
    result = await loop.run("Read")

    assert result.reason is R.TIMED_OUT
    assert result.iterations[0].results[0].content == CANCELLED_RESULT


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_the_wall_clock_interrupts_a_slow_model(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, Say("too late", delay=10))
    started = time.monotonic()

    loop = AgentLoop(stack.client(fmt, "withhold", model), limits=Limits(wall_clock=0.1))
    result = await loop.run("Hi")

    assert time.monotonic() - started < 2
    assert result.reason is R.TIMED_OUT
    assert isinstance(result.error, WallClockError)


@pytest.mark.parametrize(
    "limits",
    [{"max_turns": 0}, {"max_steps": 0}, {"max_identical_calls": 0}, {"wall_clock": 0}],
)
def test_limits_must_be_positive(limits):
    with pytest.raises(ValueError, match="Limits"):
        Limits(**limits)
