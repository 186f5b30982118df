"""Anthropic Messages wire: stream events and response bodies -> events.

Grammar (PROTOCOLS.md §c.4): message_start (ping | block)* message_delta+ message_stop, where
block := content_block_start content_block_delta* content_block_stop. Only `message_stop`
completes a stream. An identical repeated `message_start` is dropped; a different one mid-stream
(an upstream retry spliced into one stream) breaks the stream rather than corrupt the answer.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.events import (
    Event,
    MessageStart,
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
from gateway.normalize.stop_reasons import from_anthropic

TOOL_BLOCK = "tool_use"


def usage_event(usage: dict[str, Any]) -> Usage:
    """Anthropic counts cached input apart; the normalized input total includes it."""
    fresh = usage.get("input_tokens")
    read = usage.get("cache_read_input_tokens")
    created = usage.get("cache_creation_input_tokens")
    total = None if fresh is None else fresh + (read or 0) + (created or 0)
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=total,
        output_tokens=usage.get("output_tokens"),
        cache_read_tokens=read,
        cache_creation_tokens=created,
        reasoning_tokens=details.get("thinking_tokens"),
    )


def error_event(obj: dict[str, Any]) -> StreamError:
    error = obj.get("error") or {}
    return StreamError(
        "upstream_error",
        str(error.get("message") or "upstream error"),
        error.get("type") or "api_error",
    )


def stop_event(delta: dict[str, Any]) -> Stop:
    native = delta.get("stop_reason")
    reason = from_anthropic(native)
    return Stop(reason, native, delta.get("stop_sequence"), delta.get("stop_details"))


class AnthropicDecoder:
    """One upstream stream's state: `decode(frame)` per SSE frame, `eof()` at the end.

    `decode` returns the parsed event object, or None for a frame to drop (a duplicate
    message_start), with the events it carries."""

    __slots__ = ("_ended", "_start", "_tools", "block_types")

    def __init__(self) -> None:
        self._start: bytes | None = None
        self._ended = False
        self._tools: dict[int, int] = {}  # block index -> tool ordinal
        self.block_types: dict[int, str] = {}

    def decode(self, frame: SSEFrame) -> tuple[dict[str, Any] | None, list[Event]]:
        obj = orjson.loads(frame.data)
        if not isinstance(obj, dict):
            raise ValueError("event is not a JSON object")
        kind = obj.get("type") or frame.event
        handler = _HANDLERS.get(kind)
        if handler is None:
            return obj, []  # ping and event types not known yet pass through
        return handler(self, obj, frame.data)

    def eof(self) -> list[Event]:
        if self._ended:
            return []
        self._ended = True
        return [StreamError("truncated", "upstream stream ended without message_stop")]

    def _message_start(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        if self._start is not None:
            if raw.strip() == self._start:
                return None, []
            self._ended = True
            return obj, [StreamError("protocol", "upstream restarted the message mid-stream")]
        self._start = raw.strip()
        message = obj.get("message") or {}
        events: list[Event] = [MessageStart(message.get("id") or "", message.get("model") or "")]
        if message.get("usage"):
            events.append(usage_event(message["usage"]))
        return obj, events

    def _block_start(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        index = obj.get("index", len(self.block_types))
        block = obj.get("content_block") or {}
        kind = block.get("type") or ""
        self.block_types[index] = kind
        events: list[Event] = []
        if kind == TOOL_BLOCK:
            ordinal = len(self._tools)
            self._tools[index] = ordinal
            events.append(ToolCallStart(ordinal, block.get("id") or "", block.get("name") or ""))
            if block.get("input"):  # some proxies send the whole input here
                events.append(ToolCallDelta(ordinal, orjson.dumps(block["input"]).decode()))
        elif kind == "text" and block.get("text"):
            events.append(TextDelta(block["text"]))
        elif kind == "thinking" and block.get("thinking"):
            events.append(ThinkingDelta(block["thinking"]))
        return obj, events

    def _block_delta(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        delta = obj.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            return obj, [TextDelta(text)] if text else []
        if kind == "input_json_delta":
            ordinal = self._tools.get(obj.get("index", -1))
            part = delta.get("partial_json")
            if ordinal is None or not part:
                return obj, []
            return obj, [ToolCallDelta(ordinal, part)]
        if kind == "thinking_delta":
            text = delta.get("thinking")
            return obj, [ThinkingDelta(text)] if text else []
        if kind == "signature_delta":
            return obj, [ThinkingDelta("", delta.get("signature"))]
        return obj, []

    def _message_delta(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        events: list[Event] = []
        delta = obj.get("delta") or {}
        if delta.get("stop_reason") is not None:
            events.append(stop_event(delta))
        if obj.get("usage"):
            events.append(usage_event(obj["usage"]))
        return obj, events

    def _message_stop(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        if self._ended:
            return obj, []
        self._ended = True
        return obj, [StreamEnd(terminator_seen=True)]

    def _error(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        self._ended = True
        return obj, [error_event(obj)]


_HANDLERS = {
    "message_start": AnthropicDecoder._message_start,
    "content_block_start": AnthropicDecoder._block_start,
    "content_block_delta": AnthropicDecoder._block_delta,
    "message_delta": AnthropicDecoder._message_delta,
    "message_stop": AnthropicDecoder._message_stop,
    "error": AnthropicDecoder._error,
}


def response_events(body: dict[str, Any]) -> list[Event]:
    """A non-streaming Message as the events a stream of it would give."""
    events: list[Event] = [MessageStart(body.get("id") or "", body.get("model") or "")]
    ordinal = 0
    for block in body.get("content") or ():
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            events.append(TextDelta(block["text"]))
        elif kind == "thinking":
            events.append(ThinkingDelta(block.get("thinking") or "", block.get("signature")))
        elif kind == TOOL_BLOCK:
            events.append(ToolCallStart(ordinal, block.get("id") or "", block.get("name") or ""))
            events.append(ToolCallDelta(ordinal, orjson.dumps(block.get("input") or {}).decode()))
            ordinal += 1
    if body.get("usage"):
        events.append(usage_event(body["usage"]))
    events.append(stop_event(body))
    events.append(StreamEnd(terminator_seen=True))
    return events
