"""OpenAI Chat Completions wire: stream chunks and response bodies -> events.

Content, tool calls and the stop reason are taken from choice 0 (the only choice a translated
exchange can have); completeness follows every choice: an OpenAI-wire stream is complete when
each choice it opened got its finish_reason, whether or not `[DONE]` follows. A refusal
(`refusal` text with finish `stop`) is normalized REFUSAL, the native `stop` kept beside it.
Every field read goes through `gateway.formats.shape`, so a chunk of the wrong shape is a
protocol error of the upstream.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.events import (
    Event,
    MessageStart,
    RefusalDelta,
    Stop,
    StopReason,
    StreamEnd,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.formats.shape import (
    ShapeError,
    count,
    index,
    loose,
    mapping,
    objects,
    string,
)
from gateway.formats.sse import SSEFrame
from gateway.formats.stop_reasons import from_openai

DONE = b"[DONE]"
REASONING_KEYS = ("reasoning_content", "reasoning")  # DeepSeek, vLLM / OpenRouter


def usage_event(usage: Any) -> Usage:
    usage = loose(usage)
    prompt = loose(usage.get("prompt_tokens_details"))
    completion = loose(usage.get("completion_tokens_details"))
    return Usage(
        input_tokens=count(usage.get("prompt_tokens")),
        output_tokens=count(usage.get("completion_tokens")),
        cache_read_tokens=count(prompt.get("cached_tokens")),
        reasoning_tokens=count(completion.get("reasoning_tokens")),
    )


def error_event(error: Any) -> StreamError:
    if not isinstance(error, dict):
        return StreamError("upstream_error", str(error), "server_error")
    code = error.get("code")
    kind = error.get("type")
    return StreamError(
        "upstream_error",
        str(error.get("message") or "upstream error"),
        (kind if isinstance(kind, str) else None)
        or (code if isinstance(code, str) else None)
        or "server_error",
        status=code if isinstance(code, int) and not isinstance(code, bool) else None,
    )


def stop_reason(finish: str | None, refused: bool) -> StopReason:
    reason = from_openai(finish)
    return StopReason.REFUSAL if refused and reason is StopReason.STOP else reason


def function_of(call: dict[str, Any]) -> tuple[str | None, str]:
    """A tool-call delta's function name and argument text (an object is sent as its JSON)."""
    function = mapping(call.get("function"), "tool_calls.function")
    name = string(function.get("name"), "tool_calls.function.name")
    arguments = function.get("arguments")
    if arguments is None:
        return name, ""
    if isinstance(arguments, str):
        return name, arguments
    return name, orjson.dumps(arguments).decode()


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
        if key != "function_call":
            key = index(key, "tool_calls.index", position)
        call_id = string(delta.get("id"), "tool_calls.id") or ""
        ordinal = self._by_key.get(key)
        if ordinal is not None and not (call_id and call_id != self.calls[ordinal][0]):
            return ordinal, False
        ordinal = self._by_key[key] = len(self.calls)
        name, _ = function_of(delta)
        self.calls.append((call_id or f"call_gw_{ordinal}", name or ""))
        return ordinal, True

    def feed(self, position: int, delta: dict[str, Any], out: list[Event]) -> None:
        ordinal, new = self.assign(position, delta)
        if new:
            out.append(ToolCallStart(ordinal, *self.calls[ordinal]))
        _, arguments = function_of(delta)
        if arguments:
            out.append(ToolCallDelta(ordinal, arguments))


class OpenAIChatDecoder:
    """One upstream stream's state: `decode(frame)` per SSE frame, `eof()` at the end."""

    __slots__ = ("_ended", "_finished", "_opened", "_refused", "_started", "tools")

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._refused = False
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
            raise ShapeError("chunk is not a JSON object")
        events: list[Event] = []
        if obj.get("error"):
            self._ended = True
            events.append(error_event(obj["error"]))
            return obj, events
        if not self._started and obj.get("id"):
            self._started = True
            model = string(obj.get("model"), "model") or ""
            events.append(MessageStart(string(obj["id"], "id") or "", model))
        choices = obj.get("choices")
        if choices:
            if type(choices) is not list:
                raise ShapeError("choices is not an array")
            for choice in choices:
                if type(choice) is not dict:
                    raise ShapeError("an item of choices is not an object")
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
        # Per chunk: the common shapes are checked inline, the helpers only name what is wrong.
        position = choice.get("index", 0)
        if type(position) is not int:
            position = index(position, "choices.index", 0)
        self._opened.add(position)
        delta = choice.get("delta")
        if type(delta) is not dict:
            delta = mapping(delta, "choices.delta")
        if position == 0:
            if delta:
                self._refused = _delta_events(delta, self.tools, events) or self._refused
        else:
            _check_delta(delta)  # other choices are relayed as they are: check what is read
        finish = choice.get("finish_reason")
        if finish is not None and type(finish) is not str:
            raise ShapeError("finish_reason is not a string")
        if finish is not None and position not in self._finished:
            self._finished.add(position)
            if position == 0:
                events.append(_stop(stop_reason(finish, self._refused), finish, choice))


# Azure OpenAI's filter severities; any other value is recorded as plain "filtered".
SEVERITIES = frozenset({"safe", "low", "medium", "high"})


def filter_details(results: Any) -> dict[str, Any] | None:
    """Azure OpenAI's `content_filter_results` (a choice's) or `innererror.content_filter_result`
    (a filtered prompt's) as `{"content_filter": {<category>: <severity>}}`: the categories that
    filtered and how severe, never text (a category without a severity: "detected" or
    "filtered"). None when the upstream sent no results."""
    if not isinstance(results, dict) or not results:
        return None
    filtered: dict[str, str] = {}
    for category, result in results.items():
        if isinstance(result, dict) and result.get("filtered") is True and len(category) <= 64:
            severity = result.get("severity")
            if severity not in SEVERITIES:
                severity = "detected" if result.get("detected") is True else "filtered"
            filtered[category] = severity
    return {"content_filter": filtered}


def _stop(reason: StopReason, finish: str | None, choice: dict[str, Any]) -> Stop:
    """A content-filter stop carries which categories filtered (read once, at the stop)."""
    details = None
    if reason is StopReason.CONTENT_FILTER:
        details = filter_details(choice.get("content_filter_results"))
    return Stop(reason, finish, _stop_string(choice), details)


def _stop_string(choice: dict[str, Any]) -> str | None:
    matched = choice.get("stop_reason")  # vLLM: the matched stop string (or a token id)
    return matched if isinstance(matched, str) else None


def _check_delta(delta: dict[str, Any]) -> None:
    for call in objects(delta.get("tool_calls"), "tool_calls"):
        string(call.get("id"), "tool_calls.id")
        function_of(call)
    mapping(delta.get("function_call"), "function_call")


def _delta_events(delta: dict[str, Any], tools: ToolSlots, events: list[Event]) -> bool:
    """Append the events of a delta (or whole message); True when it holds refusal text."""
    if len(delta) == 1:  # most chunks: text alone
        text = delta.get("content")
        if type(text) is str:
            if text:
                events.append(TextDelta(text))
            return False
    for key in REASONING_KEYS:
        reasoning = delta.get(key)
        if reasoning and isinstance(reasoning, str):
            events.append(ThinkingDelta(reasoning))
    content = delta.get("content")
    if content:
        if type(content) is not str:
            raise ShapeError("content is not a string")
        events.append(TextDelta(content))
    refusal = delta.get("refusal")
    if refusal:
        if type(refusal) is not str:
            raise ShapeError("refusal is not a string")
        events.append(RefusalDelta(refusal))
    calls = delta.get("tool_calls")
    if calls:
        for position, call in enumerate(objects(calls, "tool_calls")):
            tools.feed(position, call, events)
    legacy = delta.get("function_call")
    if legacy:
        tools.feed(
            0, {"index": "function_call", "function": mapping(legacy, "function_call")}, events
        )
    return bool(refusal)


def response_events(body: dict[str, Any]) -> list[Event]:
    """A non-streaming response body as the events a stream of it would give."""
    choices = objects(body.get("choices"), "choices")
    if not choices:
        raise ShapeError("response has no choices")
    model = string(body.get("model"), "model") or ""
    events: list[Event] = [MessageStart(string(body.get("id"), "id") or "", model)]
    choice = choices[0]
    for other in choices[1:]:
        _check_delta(mapping(other.get("message"), "choices.message"))
        string(other.get("finish_reason"), "finish_reason")
    message = mapping(choice.get("message"), "choices.message")
    refused = _delta_events(message, ToolSlots(), events)
    if body.get("usage"):
        events.append(usage_event(body["usage"]))
    finish = string(choice.get("finish_reason"), "finish_reason")
    events.append(_stop(stop_reason(finish, refused), finish, choice))
    events.append(StreamEnd(terminator_seen=True))
    return events
