"""Anthropic Messages wire: stream events and response bodies -> events.

Grammar (PROTOCOLS.md §c.4): message_start (ping | block)* message_delta+ message_stop, where
block := content_block_start content_block_delta* content_block_stop. Only `message_stop`
completes a stream. An identical repeated `message_start` is dropped; a different one mid-stream
(an upstream retry spliced into one stream) breaks the stream rather than corrupt the answer, and
so do a block started twice and a delta for a block never started. Every field read goes through
`gateway.formats.shape`, so an event of the wrong shape is a protocol error of the upstream.
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
from gateway.formats.shape import ShapeError, count, index, loose, mapping, objects, string
from gateway.formats.sse import SSEFrame
from gateway.formats.stop_reasons import from_anthropic

TOOL_BLOCK = "tool_use"


def usage_event(usage: Any) -> Usage:
    """Anthropic counts cached input apart; the normalized input total includes it."""
    usage = loose(usage)
    fresh = count(usage.get("input_tokens"))
    read = count(usage.get("cache_read_input_tokens"))
    created = count(usage.get("cache_creation_input_tokens"))
    total = None if fresh is None else fresh + (read or 0) + (created or 0)
    details = loose(usage.get("output_tokens_details"))
    return Usage(
        input_tokens=count(total),
        output_tokens=count(usage.get("output_tokens")),
        cache_read_tokens=read,
        cache_creation_tokens=created,
        reasoning_tokens=count(details.get("thinking_tokens")),
    )


def error_event(obj: dict[str, Any]) -> StreamError:
    error = obj.get("error")
    if not isinstance(error, dict):
        return StreamError("upstream_error", str(error or "upstream error"), "api_error")
    kind = error.get("type")
    return StreamError(
        "upstream_error",
        str(error.get("message") or "upstream error"),
        kind if isinstance(kind, str) and kind else "api_error",
    )


def stop_event(delta: dict[str, Any]) -> Stop:
    native = string(delta.get("stop_reason"), "stop_reason")
    details = delta.get("stop_details")
    return Stop(
        from_anthropic(native),
        native,
        string(delta.get("stop_sequence"), "stop_sequence"),
        details if isinstance(details, dict) else None,
    )


def block_events(block: dict[str, Any], ordinal: int | None) -> list[Event]:
    """The events of a content block's start (or of a whole block, in a body); `ordinal` is the
    tool-call ordinal when the block is a tool_use block."""
    kind = string(block.get("type"), "content_block.type") or ""
    if ordinal is not None:
        call_id = string(block.get("id"), "content_block.id") or ""
        name = string(block.get("name"), "content_block.name") or ""
        events: list[Event] = [ToolCallStart(ordinal, call_id, name)]
        if block.get("input"):  # a body's whole input; some proxies send it at the start too
            events.append(ToolCallDelta(ordinal, orjson.dumps(block["input"]).decode()))
        return events
    if kind == "text":
        text = string(block.get("text"), "content_block.text")
        return [TextDelta(text)] if text else []
    if kind == "thinking":
        thinking = string(block.get("thinking"), "content_block.thinking")
        signature = string(block.get("signature"), "content_block.signature")
        return [ThinkingDelta(thinking or "", signature or None)] if thinking or signature else []
    return []


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
            raise ShapeError("event is not a JSON object")
        kind = obj.get("type")
        if type(kind) is not str or not kind:
            kind = string(kind, "type") or frame.event
        handler = _HANDLERS.get(kind or "")
        if handler is None:
            return obj, []  # ping and event types not known yet pass through
        return handler(self, obj, frame.data)

    def eof(self) -> list[Event]:
        if self._ended:
            return []
        self._ended = True
        return [StreamError("truncated", "upstream stream ended without message_stop")]

    def _broken(self, obj: dict[str, Any], message: str) -> tuple[Any, list[Event]]:
        self._ended = True
        return obj, [StreamError("protocol", message)]

    def _message_start(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        if self._start is not None:
            if raw.strip() == self._start:
                return None, []
            return self._broken(obj, "upstream restarted the message mid-stream")
        self._start = raw.strip()
        message = mapping(obj.get("message"), "message")
        message_id = string(message.get("id"), "message.id") or ""
        model = string(message.get("model"), "message.model") or ""
        events: list[Event] = [MessageStart(message_id, model)]
        if message.get("usage"):
            events.append(usage_event(message["usage"]))
        return obj, events

    def _block_start(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        position = index(obj.get("index"), "index", len(self.block_types))
        if position in self.block_types:
            return self._broken(obj, f"upstream started content block {position} twice")
        block = mapping(obj.get("content_block"), "content_block")
        kind = string(block.get("type"), "content_block.type") or ""
        self.block_types[position] = kind
        ordinal = None
        if kind == TOOL_BLOCK:
            ordinal = self._tools[position] = len(self._tools)
        return obj, block_events(block, ordinal)

    def _block_delta(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        # Per chunk: the common shapes are checked inline, the helpers only name what is wrong.
        position = obj.get("index", -1)
        if type(position) is not int:
            position = index(position, "index", -1)
        if position not in self.block_types:
            message = f"upstream sent a delta for content block {position}, never started"
            return self._broken(obj, message)
        delta = obj.get("delta")
        if type(delta) is not dict:
            delta = mapping(delta, "delta")
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            if type(text) is not str:
                text = string(text, "delta.text")
            return obj, [TextDelta(text)] if text else []
        if kind == "input_json_delta":
            part = string(delta.get("partial_json"), "delta.partial_json")
            ordinal = self._tools.get(position)
            if ordinal is None:
                message = f"upstream sent tool input for content block {position}, not a tool"
                return self._broken(obj, message)
            return obj, [ToolCallDelta(ordinal, part)] if part else []
        if kind == "thinking_delta":
            text = string(delta.get("thinking"), "delta.thinking")
            return obj, [ThinkingDelta(text)] if text else []
        if kind == "signature_delta":
            return obj, [ThinkingDelta("", string(delta.get("signature"), "delta.signature"))]
        return obj, []

    def _block_stop(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        position = index(obj.get("index"), "index", -1)
        if position not in self.block_types:
            return self._broken(obj, f"upstream stopped content block {position}, never started")
        return obj, []

    def _message_delta(self, obj: dict[str, Any], raw: bytes) -> tuple[Any, list[Event]]:
        events: list[Event] = []
        delta = mapping(obj.get("delta"), "delta")
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
    "content_block_stop": AnthropicDecoder._block_stop,
    "message_delta": AnthropicDecoder._message_delta,
    "message_stop": AnthropicDecoder._message_stop,
    "error": AnthropicDecoder._error,
}


def response_events(body: dict[str, Any]) -> list[Event]:
    """A non-streaming Message as the events a stream of it would give."""
    if not isinstance(body.get("content"), list):
        raise ShapeError("message has no content array")
    message_id = string(body.get("id"), "id") or ""
    events: list[Event] = [MessageStart(message_id, string(body.get("model"), "model") or "")]
    ordinal = 0
    for block in objects(body["content"], "content"):
        if block.get("type") == TOOL_BLOCK:
            events += block_events(block, ordinal)
            if not block.get("input"):
                events.append(ToolCallDelta(ordinal, "{}"))
            ordinal += 1
        else:
            events += block_events(block, None)
    if body.get("usage"):
        events.append(usage_event(body["usage"]))
    events.append(stop_event(body))
    events.append(StreamEnd(terminator_seen=True))
    return events
