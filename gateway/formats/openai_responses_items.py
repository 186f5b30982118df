"""The OpenAI Responses wire read whole: output items, usage, errors and the native stop value.

Shared by the stream decoder (items given whole, the terminal response) and the body decoder
(`gateway.formats.openai_responses`). Every field read goes through `gateway.formats.shape`.

    events = whole_item_events({"type": "function_call", "call_id": "c", ...}, ordinal=0)
    stop = stop_event(native_stop("incomplete", response), has_tool_calls=False, refused=False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.events import (
    Event,
    RefusalDelta,
    Stop,
    StopReason,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from gateway.formats.shape import count, loose, mapping, objects, string
from gateway.formats.stop_reasons import from_responses

FUNCTION_CALL = "function_call"
CUSTOM_CALL = "custom_tool_call"
TOOL_ITEMS = frozenset({FUNCTION_CALL, CUSTOM_CALL})


def usage_event(usage: Any) -> Usage:
    """`input_tokens` already counts the cached ones, as Chat's `prompt_tokens` does."""
    usage = loose(usage)
    given = loose(usage.get("input_tokens_details"))
    produced = loose(usage.get("output_tokens_details"))
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        cache_read_tokens=count(given.get("cached_tokens")),
        cache_creation_tokens=count(given.get("cache_write_tokens")),
        reasoning_tokens=count(produced.get("reasoning_tokens")),
    )


def error_event(obj: dict[str, Any]) -> StreamError:
    """An `error` event, nested (`{"error": {type, code, message}}`, as recorded on the wire)
    or flat (`{code, message}`, the SDK type), or a failed response's `error` object."""
    nested = obj.get("error")
    error = nested if isinstance(nested, dict) else obj
    code, kind, message = error.get("code"), error.get("type"), error.get("message")
    if not isinstance(code, str) or not code:
        code = kind if isinstance(kind, str) and kind and kind != "error" else "server_error"
    status = obj.get("status")
    return StreamError(
        "upstream_error",
        message if isinstance(message, str) and message else "upstream response failed",
        code,
        status=status if type(status) is int and status >= 400 else None,
    )


def native_stop(status: str | None, response: dict[str, Any]) -> str:
    """The native stop value of a finished response (see the module docstring)."""
    if status != "incomplete":
        return status or "unknown"
    details = mapping(response.get("incomplete_details"), "incomplete_details")
    reason = string(details.get("reason"), "incomplete_details.reason")
    return f"incomplete:{reason}" if reason else "incomplete"


def stop_event(native: str, has_tool_calls: bool, refused: bool) -> Stop:
    reason = from_responses(native)
    if reason is StopReason.STOP and has_tool_calls:
        reason = StopReason.TOOL_CALLS
    elif reason is StopReason.STOP and refused:
        reason = StopReason.REFUSAL
    return Stop(reason, native)


def custom_arguments(raw: str | None) -> str:
    return orjson.dumps({"input": raw or ""}).decode()


def escaped(piece: str) -> str:
    """A piece of a custom tool's raw input as it sits inside the `{"input": ...}` JSON string
    (JSON escapes are per character, so pieces escape independently)."""
    return orjson.dumps(piece).decode()[1:-1]


def _message_events(item: dict[str, Any], ordinal: int) -> list[Event]:
    events: list[Event] = []
    for part in objects(item.get("content"), "item.content"):
        kind = part.get("type")
        if kind == "output_text":
            text = part.get("text")
            if text.__class__ is not str:
                text = string(text, "item.content.text")
            if text:
                events.append(TextDelta(text))
        elif kind == "refusal":
            refusal = string(part.get("refusal"), "item.content.refusal")
            if refusal:
                events.append(RefusalDelta(refusal))
    return events


def _reasoning_events(item: dict[str, Any], ordinal: int) -> list[Event]:
    events: list[Event] = []
    for key in ("summary", "content"):
        for part in objects(item.get(key), f"item.{key}"):
            text = string(part.get("text"), f"item.{key}.text")
            if text:
                events.append(ThinkingDelta(text))
    return events


def call_start(item: dict[str, Any], ordinal: int) -> ToolCallStart:
    call_id = string(item.get("call_id"), "item.call_id") or string(item.get("id"), "item.id")
    name = string(item.get("name"), "item.name") or ""
    return ToolCallStart(ordinal, call_id or f"call_gw_{ordinal}", name)


def _function_events(item: dict[str, Any], ordinal: int) -> list[Event]:
    arguments = string(item.get("arguments"), "item.arguments")
    events: list[Event] = [call_start(item, ordinal)]
    if arguments:
        events.append(ToolCallDelta(ordinal, arguments))
    return events


def _custom_events(item: dict[str, Any], ordinal: int) -> list[Event]:
    raw = string(item.get("input"), "item.input")
    return [call_start(item, ordinal), ToolCallDelta(ordinal, custom_arguments(raw))]


# The events of a whole item, by type; `ordinal` is the next tool-call ordinal.
WHOLE_ITEMS: dict[str, Callable[[dict[str, Any], int], list[Event]]] = {
    "message": _message_events,
    "reasoning": _reasoning_events,
    FUNCTION_CALL: _function_events,
    CUSTOM_CALL: _custom_events,
}


def item_type(item: dict[str, Any]) -> str:
    return string(item.get("type"), "item.type") or ""


def whole_item_events(item: dict[str, Any], ordinal: int) -> list[Event]:
    return item_events_of(item_type(item), item, ordinal)


def item_events_of(kind: str, item: dict[str, Any], ordinal: int) -> list[Event]:
    """`whole_item_events` of an item whose type was read already."""
    events = WHOLE_ITEMS.get(kind)
    return events(item, ordinal) if events is not None else []
