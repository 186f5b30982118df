"""The runaway signal: an agent stuck calling the same tool with the same arguments.

Each request carries its whole conversation, so the gateway can count how many tool calls at the
end of it are byte-identical (same name, same arguments in canonical JSON: keys sorted, no
whitespace). Walking back from the last message, tool results are skipped, every assistant tool
call is compared with the newest one, and the walk stops at the first different call, at an
assistant turn without tool calls, or at a user turn that says something of its own.

    streak = identical_tool_call_streak("openai", body)   # (4, "read_file") or (0, None)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson


def canonical(arguments: Any) -> bytes:
    raw = arguments
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError:
            return arguments.encode()  # not JSON: compared as the raw text
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # nested deeper than the encoder writes: compared as sent
        return raw.encode() if isinstance(raw, str) else repr(type(raw)).encode()


def _openai_turns(messages: list[Any]) -> Iterator[list[tuple[str, bytes]] | None]:
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
        calls = []
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {} if isinstance(call, dict) else {}
            calls.append((str(fn.get("name")), canonical(fn.get("arguments"))))
        yield calls or None


def _anthropic_turns(messages: list[Any]) -> Iterator[list[tuple[str, bytes]] | None]:
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


TURNS = {"openai": _openai_turns, "anthropic": _anthropic_turns}


def identical_tool_call_streak(client_format: str, body: dict[str, Any]) -> tuple[int, str | None]:
    """How many trailing tool calls equal the newest one, and its tool name."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0, None
    newest: tuple[str, bytes] | None = None
    streak = 0
    for calls in TURNS[client_format](messages):
        if calls is None:
            break
        for call in reversed(calls):
            if newest is None:
                newest = call
            elif call != newest:
                return streak, newest[0]
            streak += 1
    return streak, newest[0] if newest else None
