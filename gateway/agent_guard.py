"""The runaway signal: an agent stuck calling the same tool with the same arguments.

Each request carries its whole conversation, so the gateway can count how many tool calls at the
end of it are byte-identical (same name, same arguments in canonical JSON: keys sorted, no
whitespace). Walking back from the last message, tool results are skipped, every assistant tool
call is compared with the newest one, and the walk stops at the first different call, at an
assistant turn without tool calls, or at a user turn that says something of its own.

    streak = identical_tool_call_streak(openai_turns, body)   # (4, "read_file") or (0, None)

Each client format's row names its reader of the history (`openai_turns`, `anthropic_turns`).
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


def openai_turns(messages: list[Any]) -> Iterator[list[tuple[str, bytes]] | None]:
    """Newest first: an assistant turn's calls, or None for a turn that ends the streak."""
    for message in reversed(messages):
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


def anthropic_turns(messages: list[Any]) -> Iterator[list[tuple[str, bytes]] | None]:
    for message in reversed(messages):
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


TurnReader = Callable[[list[Any]], Iterator[list[tuple[str, bytes]] | None]]


def identical_tool_call_streak(turns: TurnReader, body: dict[str, Any]) -> tuple[int, str | None]:
    """How many trailing tool calls equal the newest one, and its tool name."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0, None
    newest: tuple[str, bytes] | None = None
    streak = 0
    for calls in turns(messages):
        if calls is None:
            break
        for call in reversed(calls):
            if newest is None:
                newest = call
            elif call != newest:
                return streak, newest[0]
            streak += 1
    return streak, newest[0] if newest else None
