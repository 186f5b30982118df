"""Rule 4: the runaway guard. A step is a tool call started while the turn is live, counted
before the tool or its arguments are checked; the turn is a runaway at a step budget (default
256) or at K consecutive byte-identical calls (default 4); the tripping call is counted and not
run. A fresh conversation is retried once with the identical prompt, then it is a fault; a
continued conversation is not retried."""

from __future__ import annotations

import pytest

from gateway.loop import (
    ABORTED_RESULT,
    CUT_CALL_RESULT,
    AgentLoop,
    AssistantMessage,
    CompletionReason,
    Limits,
    RunawayError,
    UserMessage,
)
from tests.loop_upstream import PAIR_IDS, PAIRS, POLICIES, Counting, LoopStack, Say, read

R = CompletionReason
SAME = Say(calls=[read("a.py")])


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


def loop_for(client, counting: Counting, **limits) -> AgentLoop:
    return AgentLoop(client, [counting.tool()], hooks=counting.hooks(), limits=Limits(**limits))


def test_both_limits_are_defaulted_settings():
    assert (Limits().max_steps, Limits().max_identical_calls) == (256, 4)


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_four_identical_calls_retry_once_afresh_then_fault(stack, fmt, wire):
    model = stack.model_name(wire)
    stack.upstream.script(model, SAME)  # the same call, every time
    counting = Counting()

    result = await loop_for(stack.client(fmt, "withhold", model), counting).run("Read a.py")

    assert result.reason is R.RUNAWAY
    error = result.error
    assert isinstance(error, RunawayError) and error.type == "runaway"
    assert str(error) == "repeated an identical tool call 4 times"
    assert (error.kind, error.tool_name, error.retried) == ("identical_calls", "read_file", True)
    assert isinstance(result.retried_after, RunawayError) and not result.retried_after.retried
    # Per attempt: three calls run, the fourth is counted and not run.
    assert [i.attempt for i in result.iterations] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert len(counting.runs) == 6 and counting.reached == (6, 6, 6, 6)
    tripped = result.iterations[3].results[0]
    assert (tripped.content, tripped.is_error) == (ABORTED_RESULT, True)
    # The retry is a fresh conversation with the identical prompt, no annotation.
    requests = stack.requests(model)
    assert len(requests) == 8
    assert requests[4] == requests[0]
    assert len(requests[0]["messages"]) == 1


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_retry_that_succeeds_completes(stack, fmt, wire):
    model = stack.model_name(wire)
    stack.upstream.script(model, SAME, SAME, SAME, SAME, Say("done"))

    result = await loop_for(stack.client(fmt, "withhold", model), Counting()).run("Read a.py")

    assert (result.reason, result.text, result.error) == (R.COMPLETED, "done", None)
    assert isinstance(result.retried_after, RunawayError)
    assert [i.attempt for i in result.iterations] == [1, 1, 1, 1, 2]
    assert result.messages[0] == UserMessage("Read a.py") and len(result.messages) == 2


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_continued_conversation_is_not_retried(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, SAME)
    history = [UserMessage("Hi"), AssistantMessage("Hello! What should I read?")]

    loop = loop_for(stack.client(fmt, "withhold", model), Counting())
    result = await loop.run("Read a.py", history=history)

    assert result.reason is R.RUNAWAY
    assert isinstance(result.error, RunawayError) and not result.error.retried
    assert result.retried_after is None
    assert len(stack.requests(model)) == 4


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_identical_means_same_name_and_canonical_arguments(stack, fmt):
    model = stack.model_name("openai")
    spellings = [
        '{"path": "a.py", "n": 1}',
        '{"n":1,"path":"a.py"}',
        '{ "path" : "a.py","n":1 }',
        '{"n":1, "path":"a.py"}',
    ]
    stack.upstream.script(model, *[Say(calls=[("read_file", s)]) for s in spellings])
    counting = Counting()

    loop = loop_for(stack.client(fmt, "withhold", model), counting)
    result = await loop.run("Read", history=[UserMessage("Hi"), AssistantMessage("Hello")])

    assert result.reason is R.RUNAWAY
    assert len(counting.runs) == 3
    assert str(result.error) == "repeated an identical tool call 4 times"


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_different_call_breaks_the_identical_streak(stack, fmt):
    model = stack.model_name(fmt)
    other = Say(calls=[read("b.py")])
    stack.upstream.script(model, SAME, SAME, SAME, other, SAME, SAME, SAME, Say("done"))

    result = await loop_for(stack.client(fmt, "withhold", model), Counting()).run("Read")

    assert result.reason is R.COMPLETED and result.retried_after is None


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_the_step_budget_trips_on_the_step_past_it(stack, fmt, wire):
    model = stack.model_name(wire)
    turns = [Say(calls=[read(f"{n}.py")]) for n in range(4)]
    stack.upstream.script(model, *turns, Say("unused"))
    counting = Counting()

    loop = loop_for(stack.client(fmt, "withhold", model), counting, max_steps=3)
    result = await loop.run("Read", history=[UserMessage("Hi"), AssistantMessage("Hello")])

    assert result.reason is R.RUNAWAY
    assert str(result.error) == "exceeded 3 steps"
    assert isinstance(result.error, RunawayError) and result.error.kind == "step_budget"
    assert result.error.steps == 4
    assert [r["path"] for r in counting.runs] == ["0.py", "1.py", "2.py"]
    assert result.iterations[-1].results[0].content == ABORTED_RESULT


@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_unknown_invalid_denied_and_cut_calls_are_steps(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(
        model,
        Say(calls=[("no_such_tool", {}), ("read_file", {"wrong": 1}), read("secret")]),
        Say("Reading", calls=[read("b.py")], stop="length"),
        Say(calls=[read("c.py")]),
        Say("unused"),
    )
    counting = Counting(deny=("secret",))

    loop = loop_for(stack.client(fmt, via, model), counting, max_steps=4)
    result = await loop.run("Read", history=[UserMessage("Hi"), AssistantMessage("Hello")])

    assert result.reason is R.RUNAWAY
    assert str(result.error) == "exceeded 4 steps"
    assert counting.runs == []  # the fifth step, c.py, is the tripping call: not run
    assert counting.permission == ["call_0_2"]  # only the denied call reached the check
    contents = [r.content for i in result.iterations for r in i.results]
    assert contents[3:] == [CUT_CALL_RESULT, ABORTED_RESULT]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_tripping_call_that_could_not_run_anyway_says_why(stack, fmt):
    model = stack.model_name(fmt)
    stack.upstream.script(model, Say(calls=[("no_such_tool", {})] * 4 + [read("b.py")]))
    counting = Counting()

    loop = loop_for(stack.client(fmt, "withhold", model), counting)
    result = await loop.run("Go", history=[UserMessage("Hi"), AssistantMessage("Hello")])

    assert str(result.error) == "repeated an identical tool call 4 times"
    assert result.error.steps == 4  # the call after it was never started: not a step
    contents = [r.content for r in result.iterations[0].results]
    assert all(c.startswith("Unknown tool 'no_such_tool'") for c in contents[:4])
    assert contents[4] == ABORTED_RESULT  # answered, so the history stays valid
    assert counting.reached == (0, 0, 0, 0)


async def test_the_default_budget_admits_256_steps(stack):
    model = stack.model_name("openai")
    calls = [read(f"{n}.py") for n in range(257)]
    stack.upstream.script(model, Say(calls=calls))
    counting = Counting()

    loop = AgentLoop(stack.client("openai", "withhold", model), [counting.tool()])
    result = await loop.run("Go", history=[UserMessage("Hi"), AssistantMessage("Hello")])

    assert str(result.error) == "exceeded 256 steps"
    assert len(counting.runs) == 256


# Through the pass gateway and straight to the upstream, the loop sees the cut response's calls
# with their arguments; under withhold it sees only ids and names (no identity to compare).
CUT_PATHS = [(f, w, "pass") for f, w in PAIRS] + [
    ("openai", "openai", "direct"),
    ("anthropic", "anthropic", "direct"),
]


@pytest.mark.parametrize(("fmt", "wire", "via"), CUT_PATHS)
async def test_identical_calls_inside_one_cut_response_are_a_runaway(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("Reading", calls=[read("a.py")] * 4, stop="length"))
    counting = Counting()

    result = await loop_for(stack.client(fmt, via, model), counting).run("Read a.py")

    assert result.reason is R.RUNAWAY
    assert str(result.error) == "repeated an identical tool call 4 times"
    assert isinstance(result.error, RunawayError) and result.error.retried
    assert isinstance(result.retried_after, RunawayError)
    assert [i.attempt for i in result.iterations] == [1, 2]  # one cut response each
    assert counting.reached == (0, 0, 0, 0)  # refused calls never run
    contents = [r.content for r in result.iterations[0].results]
    assert contents == [CUT_CALL_RESULT] * 4
