"""OpenAI Chat Completions wire: stream chunks and response bodies -> events.

Content, tool calls and the stop reason are taken from choice 0 (the only choice a translated
exchange can have); completeness follows every choice: an OpenAI-wire stream is complete when
each choice it opened got its finish_reason, whether or not `[DONE]` follows.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.events import (
    Event,
    MessageStart,
    RefusalDelta,
    Stop,
    StreamEnd,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.formats.sse import SSEFrame
from gateway.normalize.stop_reasons import from_openai

DONE = b"[DONE]"
REASONING_KEYS = ("reasoning_content", "reasoning")  # DeepSeek, vLLM / OpenRouter


def usage_event(usage: dict[str, Any]) -> Usage:
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        cache_read_tokens=prompt.get("cached_tokens"),
        reasoning_tokens=completion.get("reasoning_tokens"),
    )


def error_event(error: Any) -> StreamError:
    if not isinstance(error, dict):
        return StreamError("upstream_error", str(error), "server_error")
    code = error.get("code")
    return StreamError(
        "upstream_error",
        str(error.get("message") or "upstream error"),
        error.get("type") or (code if isinstance(code, str) else None) or "server_error",
        status=code if isinstance(code, int) else None,  # vLLM puts the HTTP status here
    )


class ToolSlots:
    """Maps upstream tool-call keys to contiguous ordinals from 0.

    Keyed by the upstream `index` (servers may start at 1 or interleave calls); a delta that
    brings a new, different id at a known index opens a new call (servers that number every
    call 0). Identity fields are taken once, from a call's first delta."""

    __slots__ = ("_by_key", "calls")

    def __init__(self) -> None:
        self._by_key: dict[Any, int] = {}
        self.calls: list[tuple[str, str]] = []  # (id, name) per ordinal

    def assign(self, position: int, delta: dict[str, Any]) -> tuple[int, bool]:
        """The delta's ordinal, and whether it opens a new call."""
        key = delta.get("index", position)
        call_id = delta.get("id") or ""
        ordinal = self._by_key.get(key)
        if ordinal is not None and not (call_id and call_id != self.calls[ordinal][0]):
            return ordinal, False
        ordinal = self._by_key[key] = len(self.calls)
        name = (delta.get("function") or {}).get("name") or ""
        self.calls.append((call_id or f"call_gw_{ordinal}", name))
        return ordinal, True

    def feed(self, position: int, delta: dict[str, Any], out: list[Event]) -> None:
        ordinal, new = self.assign(position, delta)
        if new:
            out.append(ToolCallStart(ordinal, *self.calls[ordinal]))
        args = (delta.get("function") or {}).get("arguments")
        if args:
            out.append(ToolCallDelta(ordinal, args if isinstance(args, str) else _dumps(args)))


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


class OpenAIChatDecoder:
    """One upstream stream's state: `decode(frame)` per SSE frame, `eof()` at the end."""

    __slots__ = ("_ended", "_finished", "_opened", "_started", "tools")

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._opened: set[int] = set()
        self._finished: set[int] = set()
        self.tools = ToolSlots()

    @property
    def complete(self) -> bool:
        return bool(self._opened) and self._opened <= self._finished

    def decode(self, frame: SSEFrame) -> tuple[dict[str, Any] | None, list[Event]]:
        """The parsed chunk (None for `[DONE]`) and its events."""
        if frame.data == DONE:
            self._ended = True
            if self.complete:
                return None, [StreamEnd(terminator_seen=True)]
            return None, [StreamError("truncated", "upstream sent [DONE] before a finish_reason")]
        obj = orjson.loads(frame.data)
        if not isinstance(obj, dict):
            raise ValueError("chunk is not a JSON object")
        events: list[Event] = []
        if obj.get("error"):
            self._ended = True
            events.append(error_event(obj["error"]))
            return obj, events
        if not self._started and obj.get("id"):
            self._started = True
            events.append(MessageStart(obj["id"], obj.get("model") or ""))
        for choice in obj.get("choices") or ():
            self._choice(choice, events)
        usage = obj.get("usage")
        if usage:
            events.append(usage_event(usage))
        return obj, events

    def eof(self) -> list[Event]:
        if self._ended:
            return []
        self._ended = True
        if self.complete:
            return [StreamEnd(terminator_seen=False)]
        return [StreamError("truncated", "upstream stream ended before every choice finished")]

    def _choice(self, choice: dict[str, Any], events: list[Event]) -> None:
        index = choice.get("index", 0)
        self._opened.add(index)
        delta = choice.get("delta") or {}
        if index == 0 and delta:
            _delta_events(delta, self.tools, events)
        finish = choice.get("finish_reason")
        if finish is not None and index not in self._finished:
            self._finished.add(index)
            if index == 0:
                events.append(Stop(from_openai(finish), finish, _stop_string(choice)))


def _stop_string(choice: dict[str, Any]) -> str | None:
    matched = choice.get("stop_reason")  # vLLM: the matched stop string (or a token id)
    return matched if isinstance(matched, str) else None


def _delta_events(delta: dict[str, Any], tools: ToolSlots, events: list[Event]) -> None:
    for key in REASONING_KEYS:
        if delta.get(key):
            events.append(ThinkingDelta(delta[key]))
    if delta.get("content"):
        events.append(TextDelta(delta["content"]))
    if delta.get("refusal"):
        events.append(RefusalDelta(delta["refusal"]))
    calls = delta.get("tool_calls")
    if calls:
        for position, call in enumerate(calls):
            tools.feed(position, call, events)
    legacy = delta.get("function_call")
    if legacy:
        tools.feed(0, {"index": "function_call", "function": legacy}, events)


def response_events(body: dict[str, Any]) -> list[Event]:
    """A non-streaming response body as the events a stream of it would give."""
    events: list[Event] = [MessageStart(body.get("id") or "", body.get("model") or "")]
    choices = body.get("choices") or []
    if not choices:
        return [*events, StreamError("protocol", "upstream response has no choices")]
    choice = choices[0]
    message = choice.get("message") or {}
    tools = ToolSlots()
    _delta_events(message, tools, events)
    if body.get("usage"):
        events.append(usage_event(body["usage"]))
    finish = choice.get("finish_reason")
    events.append(Stop(from_openai(finish), finish, _stop_string(choice)))
    events.append(StreamEnd(terminator_seen=True))
    return events
