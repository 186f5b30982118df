"""The runaway signal: trailing byte-identical tool calls in the conversation."""

from __future__ import annotations

import json

import pytest

from gateway.agent_guard import anthropic_turns, identical_tool_call_streak, openai_turns


def openai_loop(calls: list[tuple[str, object]]) -> dict:
    messages: list[dict] = [{"role": "user", "content": "fix the bug"}]
    for n, (name, args) in enumerate(calls):
        arguments = args if isinstance(args, str) else json.dumps(args)
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": "same result"})
    return {"model": "m", "messages": messages}


def anthropic_loop(calls: list[tuple[str, object]]) -> dict:
    messages: list[dict] = [{"role": "user", "content": "fix the bug"}]
    for n, (name, args) in enumerate(calls):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "same result"}
                ],
            }
        )
    return {"model": "m", "max_tokens": 10, "messages": messages}


READ = ("read_file", {"path": "a.py", "lines": [1, 2]})


@pytest.mark.parametrize("count", [1, 3, 4, 7])
def test_streak_counts_trailing_identical_calls_openai(count):
    body = openai_loop([("ls", {})] + [READ] * count)
    assert identical_tool_call_streak(openai_turns, body) == (count, "read_file")


def test_streak_of_one_different_last_call():
    body = openai_loop([READ, READ, ("ls", {})])
    assert identical_tool_call_streak(openai_turns, body) == (1, "ls")


@pytest.mark.parametrize("count", [1, 3, 4, 6])
def test_streak_counts_trailing_identical_calls_anthropic(count):
    body = anthropic_loop([("ls", {})] + [READ] * count)
    assert identical_tool_call_streak(anthropic_turns, body) == (count, "read_file")


def test_canonical_json_ignores_key_order_and_whitespace():
    calls = [
        ("read_file", '{"path": "a.py", "lines": [1, 2]}'),
        ("read_file", '{"lines":[1,2],"path":"a.py"}'),
        ("read_file", '{ "path" : "a.py" ,"lines" : [ 1 , 2 ] }'),
        ("read_file", {"lines": [1, 2], "path": "a.py"}),
    ]
    assert identical_tool_call_streak(openai_turns, openai_loop(calls)) == (4, "read_file")


def test_a_different_argument_breaks_the_streak():
    calls = [READ, READ, ("read_file", {"path": "b.py", "lines": [1, 2]}), READ, READ]
    assert identical_tool_call_streak(openai_turns, openai_loop(calls)) == (2, "read_file")
    assert identical_tool_call_streak(anthropic_turns, anthropic_loop(calls)) == (2, "read_file")


def test_a_user_turn_of_its_own_ends_the_walk():
    body = openai_loop([READ, READ, READ])
    body["messages"].insert(-4, {"role": "user", "content": "keep going"})
    assert identical_tool_call_streak(openai_turns, body) == (2, "read_file")


def test_an_assistant_turn_without_tool_calls_ends_the_walk():
    body = anthropic_loop([READ, READ, READ, READ])
    body["messages"].insert(3, {"role": "assistant", "content": "thinking out loud"})
    assert identical_tool_call_streak(anthropic_turns, body)[0] == 3


def test_parallel_identical_calls_in_one_turn_count_each():
    body = openai_loop([READ])
    body["messages"][1]["tool_calls"].append(dict(body["messages"][1]["tool_calls"][0], id="c2"))
    assert identical_tool_call_streak(openai_turns, body) == (2, "read_file")


def test_no_messages_or_no_calls():
    assert identical_tool_call_streak(openai_turns, {"messages": "x"}) == (0, None)
    assert identical_tool_call_streak(
        anthropic_turns, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    ) == (0, None)
