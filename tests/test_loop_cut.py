"""Rule 2: the refusing policy for cut responses, and the cut final answer's marker.

A response cut at max tokens has its tool calls answered with an error result (never run: no
permission check, no hook, no tool); the loop goes on. Through the gateway's `withhold` policy
the calls arrive only as `gateway.withheld_tool_calls` (id, name); under `pass` they arrive whole
with the faithful stop reason; straight from a provider they arrive raw. All three must give the
model the same history.
"""

from __future__ import annotations

import pytest

from gateway.loop import (
    CUT_CALL_RESULT,
    TRUNCATION_MARKER,
    AgentLoop,
    CompletionReason,
    CutPolicy,
    StopReason,
    ToolResult,
    TruncatedError,
)
from tests.loop_upstream import PAIR_IDS, PAIRS, POLICIES, Counting, LoopStack, Say, read

R = CompletionReason
CUT = Say("Let me read", calls=[read("a.py")], stop="length")
UNCUT = Say("Let me read", calls=[read("a.py")])
VIAS = [(f, w, via) for f, w in PAIRS for via in POLICIES] + [
    ("openai", "openai", "direct"),
    ("anthropic", "anthropic", "direct"),
]
VIA_IDS = [f"{f}>{w}-{via}" for f, w, via in VIAS]


@pytest.fixture
async def stack():
    async with LoopStack() as running:
        yield running


def loop_for(client, counting: Counting, **options) -> AgentLoop:
    return AgentLoop(client, [counting.tool()], hooks=counting.hooks(), **options)


def history_sent(request: dict, fmt_wire: str) -> list:
    """The assistant turn and the tool results of a request, in wire-neutral tuples."""
    messages = request["messages"]
    if fmt_wire == "openai":
        calls = [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for m in messages
            if m["role"] == "assistant"
            for c in m.get("tool_calls") or ()
        ]
        results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
        return [calls, results]
    blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
    calls = [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    results = [
        (b["tool_use_id"], b.get("content"), b.get("is_error"))
        for b in blocks
        if b["type"] == "tool_result"
    ]
    return [calls, results]


@pytest.mark.parametrize(("fmt", "wire", "via"), VIAS, ids=VIA_IDS)
async def test_a_cut_responses_calls_are_refused_and_the_loop_continues(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(model, CUT, Say("done"))
    counting = Counting()

    result = await loop_for(stack.client(fmt, via, model), counting).run("Read a.py")

    assert result.turns[0].stop_reason is StopReason.LENGTH
    assert (result.reason, result.text, result.error) == (R.COMPLETED, "done", None)
    first = result.iterations[0]
    assert first.refused_cut
    assert first.results == (ToolResult("call_0_0", "read_file", CUT_CALL_RESULT, True),)
    assert counting.reached == (0, 0, 0, 0)  # neither the tool nor any hook saw it
    # What the model saw next: its call, with empty arguments, answered by the refusal.
    calls, results = history_sent(stack.requests(model)[1], wire)
    if wire == "openai":
        assert calls == [("call_0_0", "read_file", "{}")]
        assert results == [("call_0_0", f"Error: {CUT_CALL_RESULT}")]
    elif fmt == "anthropic":
        assert calls == [("call_0_0", "read_file", {})]
        assert results == [("call_0_0", CUT_CALL_RESULT, True)]
    else:  # an OpenAI tool message has no error flag: the text says it, and the gateway keeps it
        assert calls == [("call_0_0", "read_file", {})]
        assert results == [("call_0_0", f"Error: {CUT_CALL_RESULT}", None)]


@pytest.mark.parametrize(("fmt", "wire", "via"), VIAS, ids=VIA_IDS)
async def test_the_same_call_uncut_reaches_the_tool_and_every_hook(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(model, UNCUT, Say("done"))
    counting = Counting()

    result = await loop_for(stack.client(fmt, via, model), counting).run("Read a.py")

    assert result.reason is R.COMPLETED
    assert counting.reached == (1, 1, 1, 1)
    assert counting.after == [("call_0_0", False)]
    assert not result.iterations[0].refused_cut


@pytest.mark.parametrize(("fmt", "wire"), PAIRS, ids=PAIR_IDS)
async def test_the_model_sees_the_same_history_under_withhold_and_pass(stack, fmt, wire):
    seen = []
    for via in POLICIES:
        model = stack.model_name(wire)
        stack.upstream.script(
            model, Say("Reading", calls=[read("a.py"), read("b.py")], stop="length"), Say("ok")
        )
        result = await loop_for(stack.client(fmt, via, model), Counting()).run("Read")
        seen.append((stack.requests(model)[1]["messages"], result.iterations[0].results))
    assert seen[0] == seen[1]
    assert [r.content for r in seen[0][1]] == [CUT_CALL_RESULT, CUT_CALL_RESULT]


@pytest.mark.parametrize(("fmt", "wire", "via"), VIAS, ids=VIA_IDS)
async def test_a_cut_final_answer_is_marked_and_truncated(stack, fmt, wire, via):
    model = stack.model_name(wire)
    stack.upstream.script(model, Say("Here is a long answer that stops in the mid", stop="length"))

    result = await AgentLoop(stack.client(fmt, via, model)).run("Explain")

    assert result.reason is R.TRUNCATED
    assert result.error is None and result.ok
    assert result.text == f"Here is a long answer that stops in the mid\n\n{TRUNCATION_MARKER}"
    assert TRUNCATION_MARKER == "[System: response truncated at max_tokens]"


@pytest.mark.parametrize(("fmt", "wire", "via"), VIAS, ids=VIA_IDS)
async def test_the_end_policy_ends_on_a_cut_response_without_running_its_calls(
    stack, fmt, wire, via
):
    model = stack.model_name(wire)
    stack.upstream.script(model, CUT, Say("unused"))
    counting = Counting()

    loop = loop_for(stack.client(fmt, via, model), counting, cut_policy=CutPolicy.END)
    result = await loop.run("Read a.py")

    assert result.reason is R.TRUNCATED
    assert isinstance(result.error, TruncatedError)
    assert [c.name for c in result.error.not_run] == ["read_file"]
    assert result.text == f"Let me read\n\n{TRUNCATION_MARKER}"
    assert counting.reached == (0, 0, 0, 0)
    assert len(stack.requests(model)) == 1
    assert result.iterations[0].results == ()


def test_the_refusal_text_names_the_cut_and_says_the_call_was_not_run():
    assert "cut at max tokens" in CUT_CALL_RESULT
    assert "not run" in CUT_CALL_RESULT
