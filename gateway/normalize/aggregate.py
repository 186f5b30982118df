"""ChunkAggregator: folds stream events into one complete, normalized response.

No I/O; drive it from a live stream or a recorded file alike:

    agg = ChunkAggregator()
    for event in events:
        agg.handle(event)
    response = agg.final()

Tool-call arguments are kept as the raw string the upstream sent and parsed once, at the end.
A parse failure is logged with the exception class, offset and length only: JSON parsers copy the
offending text into their messages, and that text may hold secrets.

It checks the order of events instead of guessing: a tool call started twice or out of order, a
delta for a call never started, an event after the end of the stream. `handle` then records a
protocol error (the stream broke) and returns it, so the caller can end the client's stream.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from gateway.events import (
    CUT_STOP_REASONS,
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

log = logging.getLogger("gateway.aggregate")

# How a broken stream's native stop reason starts when the upstream gave none of its own (or an
# error type): the gateway's word for the break, `gateway:connection_lost`, never the upstream's.
GATEWAY_NATIVE: Final = "gateway:"


@dataclass(slots=True)
class ParseFailure:
    tool_index: int
    error_class: str
    offset: int | None
    length: int


@dataclass(slots=True)
class ToolCall:
    index: int
    id: str
    name: str
    arguments: str = ""
    parsed: Any = None
    parse_failure: ParseFailure | None = None


@dataclass(slots=True)
class AggregatedResponse:
    id: str = ""
    model: str = ""
    text: str = ""
    thinking: str = ""
    thinking_signature: str | None = None
    refusal: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: StopReason = StopReason.UNKNOWN
    native_stop_reason: str | None = None
    stop_sequence: str | None = None
    stop_details: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    complete: bool = False  # the wire's own completeness rule held
    terminator_seen: bool = False
    error: StreamError | None = None

    @property
    def cut(self) -> bool:
        return self.stop_reason in CUT_STOP_REASONS


class ChunkAggregator:
    __slots__ = (
        "_args",
        "_calls",
        "_final",
        "_handlers",
        "_refusal",
        "_resp",
        "_text",
        "_thinking",
        "_usage_base",
    )

    def __init__(self) -> None:
        self._resp = AggregatedResponse()
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._refusal: list[str] = []
        self._calls: list[ToolCall] = []
        self._args: list[list[str]] = []
        self._handlers = _HANDLERS  # _AFTER_END once the stream ended
        self._final = False
        self._usage_base: Usage | None = None  # what answers before a continuation used

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The calls seen so far (arguments not joined yet)."""
        return self._calls

    @property
    def stop(self) -> tuple[StopReason, str | None]:
        return self._resp.stop_reason, self._resp.native_stop_reason

    @property
    def error(self) -> StreamError | None:
        return self._resp.error

    @property
    def final_done(self) -> bool:
        """`final()` ran: nothing but a StreamError from outside changes the response now."""
        return self._final

    @property
    def snapshot(self) -> AggregatedResponse:
        """The response so far, without joining text or parsing arguments."""
        return self._resp

    def arguments(self, index: int) -> str:
        return "".join(self._args[index])

    def text_so_far(self) -> str:
        return "".join(self._text)

    @property
    def streamed_thinking(self) -> bool:
        return bool(self._thinking)

    @property
    def streamed_refusal(self) -> bool:
        return bool(self._refusal)

    def resume(self) -> None:
        """A continuation of this answer follows (gateway.handlers.recovery): the stream is
        open again. Its content stays; its ending (the break, or the stop at max tokens) is
        forgotten, and the usage so far is added to the continuation's."""
        resp = self._resp
        self._handlers = _HANDLERS
        self._final = False
        usage, resp.usage = resp.usage, Usage()
        self._usage_base = usage if self._usage_base is None else _summed(self._usage_base, usage)
        resp.error = None
        resp.complete = resp.terminator_seen = False
        resp.stop_reason, resp.native_stop_reason = StopReason.UNKNOWN, None
        resp.stop_sequence = resp.stop_details = None

    def handle(self, event: Event) -> StreamError | None:
        """Fold one event; returns the protocol error when the event breaks the stream's order
        (the response is then broken, as by a StreamError)."""
        if self._resp.error is not None:
            return None  # a broken stream stays broken, whatever follows it
        handler = self._handlers.get(event.__class__)
        if handler is None:
            return None
        problem: StreamError | None = handler(self, event)
        return problem

    def _late(self, event: Event) -> StreamError:
        return self._violation(f"{type(event).__name__} after the end of the stream")

    def _violation(self, problem: str) -> StreamError:
        error = StreamError("protocol", f"upstream stream out of order: {problem}")
        self._error(error)
        return error

    def _text_delta(self, event: TextDelta) -> None:
        self._text.append(event.text)

    def _thinking_delta(self, event: ThinkingDelta) -> None:
        if event.text:
            self._thinking.append(event.text)
        if event.signature is not None:
            self._resp.thinking_signature = event.signature

    def _refusal_delta(self, event: RefusalDelta) -> None:
        self._refusal.append(event.text)

    def _tool_start(self, event: ToolCallStart) -> StreamError | None:
        if event.index != len(self._calls):
            started = "started twice" if event.index < len(self._calls) else "started out of order"
            return self._violation(f"tool call {event.index} {started}")
        self._calls.append(ToolCall(event.index, event.id, event.name))
        self._args.append([])
        return None

    def _tool_delta(self, event: ToolCallDelta) -> StreamError | None:
        if not 0 <= event.index < len(self._args):
            return self._violation(f"arguments for tool call {event.index}, never started")
        self._args[event.index].append(event.arguments)
        return None

    def _message_start(self, event: MessageStart) -> None:
        self._resp.id = event.id
        self._resp.model = event.model

    def _usage(self, event: Usage) -> None:
        usage = self._resp.usage
        for name in Usage.__slots__:
            value = getattr(event, name)
            if value is not None:
                setattr(usage, name, value)

    def _stop(self, event: Stop) -> None:
        resp = self._resp
        resp.stop_reason = event.reason
        resp.native_stop_reason = event.native
        resp.stop_sequence = event.stop_sequence
        resp.stop_details = event.details

    def _end(self, event: StreamEnd) -> None:
        self._handlers = _AFTER_END
        self._resp.complete = True
        self._resp.terminator_seen = event.terminator_seen

    def _error(self, event: StreamError) -> None:
        resp = self._resp
        resp.error = event
        resp.complete = False
        resp.stop_reason = StopReason.ABORTED if event.kind == "aborted" else StopReason.ERROR
        resp.native_stop_reason = _native_for_error(event)

    def final(self) -> AggregatedResponse:
        """The whole response: text joined, arguments parsed (once: later calls return it)."""
        resp = self._resp
        if self._final:
            return resp
        self._final = True
        resp.text = "".join(self._text)
        resp.thinking = "".join(self._thinking)
        resp.refusal = "".join(self._refusal)
        for call, parts in zip(self._calls, self._args, strict=True):
            call.arguments = "".join(parts)
            call.parsed, call.parse_failure = parse_arguments(call.index, call.arguments)
        resp.tool_calls = self._calls
        if self._usage_base is not None:
            resp.usage = _summed(self._usage_base, resp.usage)
            self._usage_base = None
        return resp


def _summed(first: Usage, second: Usage) -> Usage:
    """Two answers' usage together; a count neither knows stays unknown."""
    total = Usage()
    for name in Usage.__slots__:
        a, b = getattr(first, name), getattr(second, name)
        setattr(total, name, b if a is None else a if b is None else a + b)
    return total


def _native_for_error(event: StreamError) -> str:
    if event.kind == "truncated":
        return f"{GATEWAY_NATIVE}stream_truncated"
    return event.error_type or f"{GATEWAY_NATIVE}{event.kind}"


def parse_arguments(index: int, raw: str) -> tuple[Any, ParseFailure | None]:
    if not raw:
        return {}, None
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as exc:
        failure = ParseFailure(index, type(exc).__name__, getattr(exc, "pos", None), len(raw))
        log.warning(
            "tool call arguments are not valid JSON: %s at offset %s, length %d",
            failure.error_class,
            failure.offset,
            failure.length,
            extra={
                "error_class": failure.error_class,
                "offset": failure.offset,
                "length": failure.length,
                "tool_index": index,
            },
        )
        return None, failure


_HANDLERS: dict[type, Any] = {
    TextDelta: ChunkAggregator._text_delta,
    ThinkingDelta: ChunkAggregator._thinking_delta,
    RefusalDelta: ChunkAggregator._refusal_delta,
    ToolCallStart: ChunkAggregator._tool_start,
    ToolCallDelta: ChunkAggregator._tool_delta,
    MessageStart: ChunkAggregator._message_start,
    Usage: ChunkAggregator._usage,
    Stop: ChunkAggregator._stop,
    StreamEnd: ChunkAggregator._end,
    StreamError: ChunkAggregator._error,
}
# After the end, any event but an error from outside (the client left) breaks the order.
_AFTER_END: dict[type, Any] = {
    **dict.fromkeys(_HANDLERS, ChunkAggregator._late),
    StreamError: ChunkAggregator._error,
}
