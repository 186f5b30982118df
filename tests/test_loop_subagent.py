"""Sub-agents: a parent loop hands a task to a child loop through `subagent_tool`, against the
scripted loopback upstream, through the gateway in both client formats and both upstream wires.

The child reads cut responses exactly as any run does and has its own guards; the parent reads
one text shape (pinned here on the tool's real output, as it reached the parent's upstream) and
code reads the child's typed `LoopResult`; a cut child is never a quiet success.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gateway.loop import (
    INCOMPLETE_NOTE,
    TRUNCATION_MARKER,
    AgentLoop,
    CompletionReason,
    Hooks,
    InterruptedLoopError,
    Limits,
    RunawayError,
    StalledError,
    ToolCall,
    ToolResult,
    TurnError,
    WallClockError,
    subagent_tool,
)
from tests.loop_upstream import (
    PAIR_IDS,
    PAIRS,
    POLICIES,
    Counting,
    Fail,
    LoopStack,
    Reply,
    Say,
    read,
)

R = CompletionReason
FORMATS = ("openai", "anthropic")
TASK = "Summarise a.py"


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


class Fork:
    """A parent model that delegates TASK once and then answers "done", and a child model
    scripted with `child`; both routed to an upstream speaking `wire`, read in format `fmt`."""

    def __init__(
        self,
        stack: LoopStack,
        fmt: str,
        wire: str,
        *child: Reply,
        via: str = "withhold",
        stream: bool = False,
        child_limits: Limits | None = None,
        parent_limits: Limits | None = None,
        result_limit: int = 8000,
        hooks: Hooks | None = None,
    ) -> None:
        self.stack = stack
        self.parent_model = stack.model_name(wire)
        self.child_model = stack.model_name(wire)
        delegate = Say(calls=[("research", {"task": TASK})])
        stack.upstream.script(self.parent_model, delegate, Say("done"))
        stack.upstream.script(self.child_model, *child)
        self.files = Counting()
        child_loop = AgentLoop(
            stack.client(fmt, via, self.child_model, stream=stream),
            [self.files.tool()],
            system="You research one task.",
            limits=child_limits,
        )
        tool = subagent_tool("research", "Research a task", child_loop, result_limit=result_limit)
        self.parent = AgentLoop(
            stack.client(fmt, via, self.parent_model), [tool], limits=parent_limits, hooks=hooks
        )

    async def run(self, cancel: asyncio.Event | None = None) -> Any:
        return await self.parent.run("Research a.py for me", cancel=cancel)

    def child_requests(self) -> list[dict[str, Any]]:
        return self.stack.requests(self.child_model)

    def read_by_parent(self) -> str:
        """The tool result the parent model received in its second request, as the upstream got
        it (a `tool` message on the OpenAI wire, a `tool_result` block on the Anthropic wire)."""
        body = self.stack.requests(self.parent_model)[1]
        for message in body["messages"]:
            if message.get("role") == "tool":
                return str(message["content"])
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if block.get("type") == "tool_result":
                    inner = block["content"]
                    if isinstance(inner, list):
                        return "".join(part["text"] for part in inner)
                    return str(inner)
        raise AssertionError("the parent's second request carries no tool result")


def only_subagent(result: Any) -> Any:
    (child,) = result.iterations[0].subagents
    return child


# --- the child's outcomes, as the parent reads them ----------------------------------------------


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_child_that_completes(stack, fmt, wire):
    fork = Fork(stack, fmt, wire, Say("a.py defines one function."))

    result = await fork.run()

    assert result.reason is R.COMPLETED and result.text == "done"
    assert fork.read_by_parent() == (
        "Status: SUCCESS\n"
        "Iterations: 1\n"
        "Tokens: 46 (12 input, 34 output)\n"
        "\n"
        "Result:\n"
        "a.py defines one function."
    )
    child = only_subagent(result)
    assert child.reason is R.COMPLETED and child.text == "a.py defines one function."
    assert fork.child_requests()[0]["messages"][-1]["content"] in (
        TASK,
        [{"type": "text", "text": TASK}],
    )
    assert not result.iterations[0].results[0].failed


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_child_cut_at_max_tokens_is_a_success_that_says_it_is_incomplete(
    stack, fmt, wire, stream
):
    fork = Fork(stack, fmt, wire, Say("a.py defines one fun", stop="length"), stream=stream)

    result = await fork.run()

    shown = fork.read_by_parent()
    assert shown == (
        "Status: SUCCESS\n"
        "Iterations: 1\n"
        "Tokens: 46 (12 input, 34 output)\n"
        "\n"
        "Result:\n"
        "a.py defines one fun\n"
        "\n"
        "[System: response truncated at max_tokens]\n"
        "\n"
        "Completion reason: TRUNCATED (the subagent's final answer is incomplete)"
    )
    child = only_subagent(result)
    assert child.reason is R.TRUNCATED and child.text.endswith(TRUNCATION_MARKER)
    assert result.iterations[0].results[0].subagent is child


@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_child_whose_every_response_is_cut_stops_after_three(stack, fmt, wire, via):
    cut = Say("Reading", calls=[read("a.py")], stop="length")
    fork = Fork(stack, fmt, wire, cut, via=via)

    result = await fork.run()

    assert len(fork.child_requests()) == 3  # not up to any iteration limit
    assert fork.files.runs == []
    assert fork.read_by_parent() == (
        "Status: FAILURE\n"
        "Iterations: 3\n"
        "Tokens: 138 (36 input, 102 output)\n"
        "\n"
        "Result:\n"
        "Execution aborted: 3 consecutive tool-only iterations made no progress (all tool calls "
        "failed) — each of those responses was cut off at max_tokens, and its tool calls were "
        "refused\n"
        "\n"
        "Completion reason: ERROR"
    )
    child = only_subagent(result)
    assert isinstance(child.error, StalledError) and child.error.all_refused
    answered = result.iterations[0].results[0]
    assert answered.failed and not answered.is_error  # the report itself says FAILURE
    assert result.reason is R.COMPLETED  # the parent itself goes on: it read a clear failure


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_child_that_fails(stack, fmt, wire):
    fork = Fork(stack, fmt, wire, Fail(500, "upstream exploded"))

    result = await fork.run()

    shown = fork.read_by_parent()
    child = only_subagent(result)
    assert isinstance(child.error, TurnError)
    assert shown.startswith("Status: FAILURE\nIterations: 1\nTokens: 0 (0 input, 0 output)\n\n")
    assert shown == (
        "Status: FAILURE\n"
        "Iterations: 1\n"
        "Tokens: 0 (0 input, 0 output)\n"
        "\n"
        "Result:\n"
        f"{child.error}\n"
        "\n"
        "Completion reason: ERROR"
    )
    assert str(child.error).startswith("the model turn failed (http_status): ")
    assert result.iterations[0].results[0].failed


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_runaway_child_is_retried_once_and_reported(stack, fmt):
    fork = Fork(stack, fmt, fmt, Say(calls=[read("a.py")]))

    result = await fork.run()

    child = only_subagent(result)
    assert isinstance(child.error, RunawayError) and child.error.retried
    assert len(fork.child_requests()) == 8  # 4 identical calls, then the fresh retry's 4
    shown = fork.read_by_parent()
    assert shown.startswith("Status: FAILURE\nIterations: 8\n")
    assert shown.endswith(
        "Result:\nrepeated an identical tool call 4 times\n\nCompletion reason: RUNAWAY"
    )


# --- cancellation and the wall clock reach the child ---------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_child_cancelled_through_the_parent(stack, fmt, wire, stream):
    fork = Fork(stack, fmt, wire, Say("too late", delay=10), stream=stream)
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.2, cancel.set)
    started = time.monotonic()

    result = await fork.run(cancel)

    assert time.monotonic() - started < 2  # the child's model call was abandoned at once
    assert result.reason is R.INTERRUPTED
    assert isinstance(result.error, InterruptedLoopError)
    assert len(fork.child_requests()) == 1
    assert len(stack.requests(fork.parent_model)) == 1  # the parent asked nothing more
    child = only_subagent(result)
    assert child.reason is R.INTERRUPTED
    answered = result.iterations[0].results[0]
    assert answered.failed and answered.content.endswith("Completion reason: INTERRUPTED")


@pytest.mark.parametrize("fmt", FORMATS)
async def test_the_parents_wall_clock_reaches_the_child(stack, fmt):
    fork = Fork(stack, fmt, fmt, Say("too late", delay=10), parent_limits=Limits(wall_clock=0.3))
    started = time.monotonic()

    result = await fork.run()

    assert time.monotonic() - started < 2
    assert result.reason is R.TIMED_OUT and isinstance(result.error, WallClockError)
    child = only_subagent(result)
    assert child.reason is R.TIMED_OUT
    assert child.error is not None and "0.3 s" in str(child.error)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_cancelling_the_parents_task_cancels_the_child(stack, fmt):
    fork = Fork(stack, fmt, fmt, Say("too late", delay=10))
    task = asyncio.create_task(fork.run())
    while not fork.child_requests():
        await asyncio.sleep(0.01)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(fork.child_requests()) == 1


# --- shortening keeps the tail -------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_a_long_cut_answer_is_shortened_with_the_marker_kept(stack, fmt, wire):
    answer = "BEGIN " + "filler " * 1000 + "the last words"
    fork = Fork(stack, fmt, wire, Say(answer, stop="length"), result_limit=300)

    result = await fork.run()

    shown = fork.read_by_parent()
    head, body = shown.split("\n\nResult:\n")
    body, reason = body.rsplit("\n\n", 1)
    assert head == "Status: SUCCESS\nIterations: 1\nTokens: 46 (12 input, 34 output)"
    assert reason == "Completion reason: TRUNCATED" + INCOMPLETE_NOTE
    assert len(body) <= 300
    assert body.startswith("BEGIN filler")
    assert body.endswith("filler the last words\n\n" + TRUNCATION_MARKER)
    elided = len(answer) + len("\n\n" + TRUNCATION_MARKER) - (len(body) - len(_note(body)))
    assert _note(body) == f"\n[... {elided} characters elided ...]\n"
    assert only_subagent(result).text == answer + "\n\n" + TRUNCATION_MARKER  # code gets it whole


def _note(body: str) -> str:
    start = body.index("\n[... ")
    return body[start : body.index(" ...]\n", start) + len(" ...]\n")]


# --- a cut fork is never a quiet success anywhere it is reported ---------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
async def test_the_parents_record_and_hooks_carry_the_childs_completion_reason(stack, fmt):
    seen: list[tuple[str, CompletionReason | None]] = []

    async def after(call: ToolCall, result: ToolResult) -> None:
        seen.append((call.name, result.subagent.reason if result.subagent else None))

    fork = Fork(stack, fmt, fmt, Say("cut sh", stop="length"), hooks=Hooks(after_tool=after))

    result = await fork.run()

    assert seen == [("research", R.TRUNCATED)]
    (iteration, _) = result.iterations
    assert [child.reason for child in iteration.subagents] == [R.TRUNCATED]
    assert iteration.results[0].content.endswith("Completion reason: TRUNCATED" + INCOMPLETE_NOTE)


async def test_a_task_that_is_not_a_string_is_an_error_result_and_runs_no_child(stack):
    fork = Fork(stack, "openai", "openai", Say("unused"))
    stack.upstream.script(fork.parent_model, Say(calls=[("research", {"task": 7})]), Say("ok"))

    result = await fork.run()

    answered = result.iterations[0].results[0]
    assert answered.is_error and "`task` must be a non-empty string" in answered.content
    assert answered.subagent is None and fork.child_requests() == []


@pytest.mark.parametrize("fmt", FORMATS)
async def test_three_failed_forks_in_a_row_stall_the_parent(stack, fmt):
    fork = Fork(stack, fmt, fmt, Fail(500, "upstream exploded"))
    tasks = [Say(calls=[("research", {"task": f"task {n}"})]) for n in range(3)]
    stack.upstream.script(fork.parent_model, *tasks, Say("unused"))

    result = await fork.run()

    assert result.reason is R.ERROR and isinstance(result.error, StalledError)
    assert not result.error.all_refused
    assert len(stack.requests(fork.parent_model)) == 3
    assert [i.stalled for i in result.iterations] == [True, True, True]
