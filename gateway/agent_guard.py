"""The runaway signal: an agent stuck calling the same tool with the same arguments.

Each request carries its whole conversation, so the gateway can count how many tool calls at the
end of it are byte-identical (same name, same arguments in canonical JSON: keys sorted, no
whitespace). Walking back from the last message, tool results are skipped, every assistant tool
call is compared with the newest one, and the walk stops at the first different call, at an
assistant turn without tool calls, or at a user turn that says something of its own.

    streak = identical_tool_call_streak(openai_turns, body)   # (4, "read_file") or (0, None)

Each client format's row names its reader of the history (`openai_turns`, `anthropic_turns`,
`responses_turns`), which reads it out of the request body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson


def canonical(arguments: Any) -> bytes:
    text = arguments if isinstance(arguments, str) else None
    if text is not None:
        try:
            arguments = orjson.loads(text or "{}")
        except orjson.JSONDecodeError:
            return text.encode()  # not JSON: compared as the raw text
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # nested deeper than the encoder writes: compared as sent
        return text.encode() if text is not None else repr(arguments).encode()


def _history(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    return value if isinstance(value, list) else []


def openai_turns(body: dict[str, Any]) -> Iterator[list[tuple[str, bytes]] | None]:
    """Newest first: an assistant turn's calls, or None for a turn that ends the streak."""
    for message in reversed(_history(body, "messages")):
        if not isinstance(message, dict):
            yield None
            return
        role = message.get("role")
        if role in ("tool", "function"):
            continue
        if role != "assistant":
            yield None
            return
        listed = message.get("tool_calls")
        calls = []
        for call in listed if isinstance(listed, list) else ():
            fn = call.get("function") if isinstance(call, dict) else None
            fn = fn if isinstance(fn, dict) else {}
            calls.append((str(fn.get("name")), canonical(fn.get("arguments"))))
        yield calls or None


def anthropic_turns(body: dict[str, Any]) -> Iterator[list[tuple[str, bytes]] | None]:
    for message in reversed(_history(body, "messages")):
        if not isinstance(message, dict):
            yield None
            return
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "user":
            if blocks and all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
            ):
                continue
            yield None
            return
        if message.get("role") != "assistant":
            yield None
            return
        calls = [
            (str(b.get("name")), canonical(b.get("input")))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        yield calls or None


_CALL_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}
_SKIPPED_ITEMS = frozenset({"function_call_output", "custom_tool_call_output", "reasoning"})


def responses_turns(body: dict[str, Any]) -> Iterator[list[tuple[str, bytes]] | None]:
    """Items, newest first: each call is a turn of one call; outputs and reasoning are skipped;
    an assistant message belongs to the calls that follow it, any other item ends the streak."""
    after_call = False
    for item in reversed(_history(body, "input")):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind in _CALL_ITEMS:
            assert isinstance(item, dict)
            value = item.get(_CALL_ITEMS[kind])
            args = value if kind == "function_call" else orjson.dumps({"input": value}).decode()
            after_call = True
            yield [(str(item.get("name")), canonical(args))]
            continue
        if kind in _SKIPPED_ITEMS:
            continue
        assistant = isinstance(item, dict) and item.get("role") == "assistant"
        if kind == "message" and after_call and assistant:
            continue
        yield None
        return


TurnReader = Callable[[dict[str, Any]], Iterator[list[tuple[str, bytes]] | None]]


def identical_tool_call_streak(turns: TurnReader, body: dict[str, Any]) -> tuple[int, str | None]:
    """How many trailing tool calls equal the newest one, and its tool name."""
    newest: tuple[str, bytes] | None = None
    streak = 0
    for calls in turns(body):
        if calls is None:
            break
        for call in reversed(calls):
            if newest is None:
                newest = call
            elif call != newest:
                return streak, newest[0]
            streak += 1
    return streak, newest[0] if newest else None
