"""`OpenAIResponsesClient`: the loop over the Responses wire, through the gateway to both
upstream wires, keeps the same rules as over Chat and Messages: calls of a complete turn run,
a cut turn's calls never run (under both truncation policies), a cut final answer is marked
TRUNCATED, and three refused cut iterations stall the run with the max-tokens clause."""

from __future__ import annotations

import pytest

from gateway.loop import (
    ALL_REFUSED_SUFFIX,
    TRUNCATION_MARKER,
    AgentLoop,
    CompletionReason,
    StalledError,
)
from tests.loop_upstream import POLICIES, Counting, LoopStack, Say, read

R = CompletionReason
WIRES = ("openai", "anthropic")
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


@STREAMS
@pytest.mark.parametrize("wire", WIRES)
async def test_a_tool_loop_completes(stack, wire, stream):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("Reading", calls=[read("a.py")]), Say("It defines f."))
    files = Counting()

    client = stack.client("responses", "withhold", model, stream=stream)
    result = await AgentLoop(client, [files.tool()], system="Be brief.").run("What is in a.py?")

    assert result.reason is R.COMPLETED and result.text == "It defines f."
    assert files.runs == [{"path": "a.py"}]
    first, second = stack.requests(model)
    assert result.turns[0].tool_calls[0].id == "call_0_0"
    if wire == "openai":
        assert second["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "call_0_0",
            "content": "contents of a.py",
        }
        assert first["messages"][0] == {"role": "system", "content": "Be brief."}
    else:
        assert second["messages"][-1]["content"][0]["tool_use_id"] == "call_0_0"
        assert first["system"] == "Be brief."
    assert result.tokens.total > 0


@STREAMS
@pytest.mark.parametrize("via", POLICIES)
@pytest.mark.parametrize("wire", WIRES)
async def test_a_cut_turns_calls_never_run(stack, wire, via, stream):
    model = stack.model_name(wire)
    cut = Say("Reading", calls=[read("a.py")], stop="length")
    stack.upstream.script(model, cut)  # every answer is cut
    files = Counting()

    client = stack.client("responses", via, model, stream=stream)
    result = await AgentLoop(client, [files.tool()]).run("Read a.py")

    assert files.runs == []
    assert result.reason is R.ERROR and isinstance(result.error, StalledError)
    assert str(result.error).endswith(ALL_REFUSED_SUFFIX)
    assert len(stack.requests(model)) == 3
    assert all(iteration.refused_cut for iteration in result.iterations)


@STREAMS
@pytest.mark.parametrize("wire", WIRES)
async def test_a_cut_final_answer_is_marked_truncated(stack, wire, stream):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("The answer is", stop="length"))

    client = stack.client("responses", "withhold", model, stream=stream)
    result = await AgentLoop(client).run("Answer")

    assert result.reason is R.TRUNCATED
    assert result.text == "The answer is\n\n" + TRUNCATION_MARKER
    assert result.turns[0].truncated
