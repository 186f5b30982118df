"""OpenAI Responses wire: stream events and Response bodies -> events.

Grammar (PROTOCOLS.md §b.3): response.created response.in_progress item* terminal, where
item := output_item.added (content or argument deltas)* output_item.done and terminal is
response.completed | response.incomplete | response.failed (an `error` event may come first).
There is no `[DONE]`: only response.completed or response.incomplete completes a stream;
response.failed, an `error` event, and a body that ends before a terminal event are a
StreamError. A second, different response.created (a retry spliced into the stream), an output
index added twice, a delta for an item never added and an item that changes its type break it.

Items are keyed by `output_index`, never by id: a GitHub Copilot proxy rotates `id` / `item_id`
on every event (PROTOCOLS.md §g.17). Function calls are tool calls in the order their items are
added (ordinals 0, 1, ...) with the item's `call_id` as id; a custom tool call's raw input is
carried as `{"input": <raw>}` JSON. Reasoning summaries and raw reasoning text are thinking
(OpenAI's `encrypted_content` means nothing to another wire and is not passed on). The texts of
several message items are joined without a separator, as the SDK's `output_text` does. An item
that arrives only whole (in its output_item.done, or only in the terminal response of a stream
that streamed no item at all) gives the same events as its deltas would.

The wire has no finish reason; the native stop value is made from the terminal response
(`stop_reasons.RESPONSES_NATIVE`): `completed`, `incomplete:<incomplete_details.reason>`, or
the status itself. `completed` is TOOL_CALLS when the output holds tool calls and REFUSAL when it
holds refusal text, as on the Chat wire. Every field read goes through `gateway.formats.shape`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.events import (
    Event,
    MessageStart,
    RefusalDelta,
    StreamEnd,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from gateway.formats.openai_responses_items import (
    CUSTOM_CALL,
    FUNCTION_CALL,
    TOOL_ITEMS,
    WHOLE_ITEMS,
    call_start,
    custom_arguments,
    error_event,
    escaped,
    item_type,
    native_stop,
    stop_event,
    usage_event,
    whole_item_events,
)
from gateway.formats.shape import ShapeError, index, mapping, objects, string
from gateway.formats.sse import SSEFrame

CUSTOM_OPEN = '{"input":"'
CUSTOM_CLOSE = '"}'
UNFINISHED = frozenset({"in_progress", "queued"})
TEXT_DELTA = "response.output_text.delta"

Handled = tuple[dict[str, Any] | None, list[Event]]


class _Item:
    """One output item of the stream: its type, its tool ordinal, what of it was given."""

    __slots__ = ("done", "kind", "opened", "ordinal", "streamed")

    def __init__(self, kind: str, ordinal: int | None, done: bool = False) -> None:
        self.kind = kind
        self.ordinal = ordinal
        self.streamed = False  # content or arguments arrived in deltas
        self.opened = False  # a custom call's `{"input":"` went out
        self.done = done


class OpenAIResponsesDecoder:
    """One upstream stream's state: `decode(frame)` per SSE frame, `eof()` at the end.

    `decode` returns the parsed event object, or None for a frame to drop (a repeated, identical
    response.created), with the events it carries."""

    __slots__ = ("_created", "_ended", "_items", "_last", "_refused", "_started", "_tools")

    def __init__(self) -> None:
        self._created: bytes | None = None
        self._started = False
        self._ended = False
        self._refused = False
        self._items: dict[int, _Item] = {}  # output_index -> item
        self._last = -1  # the output index deltas without one refer to
        self._tools = 0

    def decode(self, frame: SSEFrame) -> Handled:
        obj = orjson.loads(frame.data)
        if not isinstance(obj, dict):
            raise ShapeError("event is not a JSON object")
        if self._ended:
            return obj, []
        kind = obj.get("type")
        if kind == TEXT_DELTA:
            # The hot path, inline: a text delta of an item added (else `_text_delta` says why).
            position = obj.get("output_index", self._last)
            state = self._items.get(position) if type(position) is int else None
            delta = obj.get("delta")
            if state is not None and type(delta) is str:
                state.streamed = True
                return obj, [TextDelta(delta)] if delta else []
        elif type(kind) is not str or not kind:
            kind = string(kind, "type") or frame.event
        handler = _HANDLERS.get(kind or "")
        if handler is None:
            return obj, []  # annotations, content parts, hosted tools' progress, new types
        return handler(self, obj, frame.data)

    def eof(self) -> list[Event]:
        if self._ended:
            return []
        self._ended = True
        return [StreamError("truncated", "upstream stream ended without response.completed")]

    def _broken(self, obj: dict[str, Any], message: str) -> Handled:
        self._ended = True
        return obj, [StreamError("protocol", message)]

    def _start(self, response: dict[str, Any]) -> list[Event]:
        if self._started:
            return []
        self._started = True
        response_id = string(response.get("id"), "response.id") or ""
        return [MessageStart(response_id, string(response.get("model"), "response.model") or "")]

    def _response_created(self, obj: dict[str, Any], raw: bytes) -> Handled:
        if self._created is not None:
            if raw.strip() == self._created:
                return None, []
            return self._broken(obj, "upstream restarted the response mid-stream")
        self._created = raw.strip()
        return obj, self._start(mapping(obj.get("response"), "response"))

    def _response_progress(self, obj: dict[str, Any], raw: bytes) -> Handled:
        return obj, self._start(mapping(obj.get("response"), "response"))

    def _new_tool(self, kind: str) -> int | None:
        if kind not in TOOL_ITEMS:
            return None
        self._tools += 1
        return self._tools - 1

    def _item_added(self, obj: dict[str, Any], raw: bytes) -> Handled:
        position = index(obj.get("output_index"), "output_index", len(self._items))
        if position in self._items:
            return self._broken(obj, f"upstream added output index {position} twice")
        item = mapping(obj.get("item"), "item")
        kind = item_type(item)
        state = self._items[position] = _Item(kind, self._new_tool(kind))
        self._last = position
        if state.ordinal is None:
            return obj, []
        events: list[Event] = [call_start(item, state.ordinal)]
        arguments = string(item.get("arguments"), "item.arguments")
        if kind == FUNCTION_CALL and arguments:  # some proxies send them whole here
            state.streamed = True
            events.append(ToolCallDelta(state.ordinal, arguments))
        return obj, events

    def _item_done(self, obj: dict[str, Any], raw: bytes) -> Handled:
        position = index(obj.get("output_index"), "output_index", self._last)
        item = mapping(obj.get("item"), "item")
        kind = item_type(item)
        state = self._items.get(position)
        if state is None:  # an item given only whole
            self._items[position] = _Item(kind, None, done=True)
            return obj, self._whole(item)
        if kind != state.kind:
            return self._broken(obj, f"upstream changed the type of output item {position}")
        if state.done:
            return obj, []  # a repeated done
        state.done = True
        if state.ordinal is not None and state.kind == CUSTOM_CALL:
            if state.opened:
                return obj, [ToolCallDelta(state.ordinal, CUSTOM_CLOSE)]
            raw_input = string(item.get("input"), "item.input")
            return obj, [ToolCallDelta(state.ordinal, custom_arguments(raw_input))]
        if state.streamed:
            return obj, []
        if state.ordinal is not None:  # its start went out when it was added
            return obj, whole_item_events(item, state.ordinal)[1:]
        return obj, self._whole(item, tool=False)

    def _item(self, obj: dict[str, Any]) -> tuple[_Item | None, int]:
        position = obj.get("output_index", self._last)
        if type(position) is not int:
            position = index(position, "output_index", self._last)
        return self._items.get(position), position

    def _delta(self, obj: dict[str, Any], event: Callable[[str], Event]) -> Handled:
        # Per chunk: the common shapes are checked inline, the helpers only name what is wrong.
        state, position = self._item(obj)
        if state is None:
            return self._broken(
                obj, f"upstream sent a delta for output item {position}, never added"
            )
        delta = obj.get("delta")
        if type(delta) is not str:
            delta = string(delta, "delta")
        state.streamed = True
        return obj, [event(delta)] if delta else []

    def _text_delta(self, obj: dict[str, Any], raw: bytes) -> Handled:
        return self._delta(obj, TextDelta)

    def _refusal_delta(self, obj: dict[str, Any], raw: bytes) -> Handled:
        self._refused = True
        return self._delta(obj, RefusalDelta)

    def _thinking_delta(self, obj: dict[str, Any], raw: bytes) -> Handled:
        return self._delta(obj, ThinkingDelta)

    def _call(self, obj: dict[str, Any], kind: str) -> tuple[_Item, int] | None:
        """The call item an input event is for, and its ordinal; None when it is no such call."""
        state, _ = self._item(obj)
        if state is None or state.ordinal is None or state.kind != kind:
            return None
        return state, state.ordinal

    def _not_a_call(self, obj: dict[str, Any], kind: str) -> Handled:
        _, position = self._item(obj)
        return self._broken(obj, f"upstream sent {kind} input for output item {position}")

    def _arguments_delta(self, obj: dict[str, Any], raw: bytes) -> Handled:
        call = self._call(obj, FUNCTION_CALL)
        if call is None:
            return self._not_a_call(obj, FUNCTION_CALL)
        ordinal = call[1]
        return self._delta(obj, lambda delta: ToolCallDelta(ordinal, delta))

    def _arguments_done(self, obj: dict[str, Any], raw: bytes) -> Handled:
        call = self._call(obj, FUNCTION_CALL)
        if call is None:
            return self._not_a_call(obj, FUNCTION_CALL)
        state, ordinal = call
        arguments = string(obj.get("arguments"), "arguments")
        if state.streamed or not arguments:
            return obj, []
        state.streamed = True  # a server that sends the arguments only whole, here
        return obj, [ToolCallDelta(ordinal, arguments)]

    def _custom_delta(self, obj: dict[str, Any], raw: bytes) -> Handled:
        call = self._call(obj, CUSTOM_CALL)
        if call is None:
            return self._not_a_call(obj, CUSTOM_CALL)
        state, ordinal = call
        delta = string(obj.get("delta"), "delta")
        if not delta:
            return obj, []
        head = "" if state.opened else CUSTOM_OPEN
        state.opened = state.streamed = True
        return obj, [ToolCallDelta(ordinal, head + escaped(delta))]

    def _finished(self, obj: dict[str, Any], raw: bytes) -> Handled:
        response = mapping(obj.get("response"), "response")
        events = self._start(response)
        if not self._items:  # a stream that gave its output only in the terminal response
            for item in objects(response.get("output"), "response.output"):
                events += self._whole(item)
        if response.get("usage"):
            events.append(usage_event(response["usage"]))
        status = "incomplete" if obj.get("type") == "response.incomplete" else "completed"
        native = native_stop(status, response)
        events.append(stop_event(native, self._tools > 0, self._refused))
        events.append(StreamEnd(terminator_seen=True))
        self._ended = True
        return obj, events

    def _whole(self, item: dict[str, Any], tool: bool = True) -> list[Event]:
        """The events of an item given whole (a new tool call when it is one)."""
        ordinal = self._new_tool(item_type(item)) if tool else None
        events = whole_item_events(item, ordinal or 0)
        self._refused = self._refused or any(isinstance(e, RefusalDelta) for e in events)
        return events

    def _failed(self, obj: dict[str, Any], raw: bytes) -> Handled:
        self._ended = True
        response = mapping(obj.get("response"), "response")
        error = mapping(response.get("error"), "response.error")
        return obj, [*self._start(response), error_event({"error": error})]

    def _error(self, obj: dict[str, Any], raw: bytes) -> Handled:
        self._ended = True
        return obj, [error_event(obj)]


_HANDLERS: dict[str, Callable[[OpenAIResponsesDecoder, dict[str, Any], bytes], Handled]] = {
    "response.created": OpenAIResponsesDecoder._response_created,
    "response.queued": OpenAIResponsesDecoder._response_progress,
    "response.in_progress": OpenAIResponsesDecoder._response_progress,
    "response.output_item.added": OpenAIResponsesDecoder._item_added,
    "response.output_item.done": OpenAIResponsesDecoder._item_done,
    "response.output_text.delta": OpenAIResponsesDecoder._text_delta,
    "response.refusal.delta": OpenAIResponsesDecoder._refusal_delta,
    "response.reasoning_summary_text.delta": OpenAIResponsesDecoder._thinking_delta,
    "response.reasoning_text.delta": OpenAIResponsesDecoder._thinking_delta,
    "response.function_call_arguments.delta": OpenAIResponsesDecoder._arguments_delta,
    "response.function_call_arguments.done": OpenAIResponsesDecoder._arguments_done,
    "response.custom_tool_call_input.delta": OpenAIResponsesDecoder._custom_delta,
    "response.completed": OpenAIResponsesDecoder._finished,
    "response.incomplete": OpenAIResponsesDecoder._finished,
    "response.failed": OpenAIResponsesDecoder._failed,
    "error": OpenAIResponsesDecoder._error,
}


def response_events(body: dict[str, Any]) -> list[Event]:
    """A non-streaming Response object as the events a stream of it would give."""
    if not isinstance(body.get("output"), list):
        raise ShapeError("response has no output array")
    response_id = string(body.get("id"), "id") or ""
    events: list[Event] = [MessageStart(response_id, string(body.get("model"), "model") or "")]
    tools, refused = 0, False
    for item in objects(body["output"], "output"):
        kind = item.get("type")
        if kind.__class__ is not str:
            kind = item_type(item)  # "" when absent, else a ShapeError
        whole = WHOLE_ITEMS.get(kind)  # item_events_of, inline
        item_events = whole(item, tools) if whole is not None else []
        if kind in TOOL_ITEMS:
            tools += 1
        elif kind == "message" and not refused:  # only a message holds refusal text
            refused = RefusalDelta in map(type, item_events)  # no subclass: isinstance's answer
        events += item_events
    if body.get("usage"):
        events.append(usage_event(body["usage"]))
    status = string(body.get("status"), "status")
    if status == "failed":
        return [*events, error_event({"error": mapping(body.get("error"), "error")})]
    if status in UNFINISHED:
        return [*events, StreamError("protocol", f"upstream response is still {status}")]
    events.append(stop_event(native_stop(status, body), tools > 0, refused))
    events.append(StreamEnd(terminator_seen=True))
    return events
