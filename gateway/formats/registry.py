"""The upstream wires the gateway reads, one row each; the server and `gateway.loop` share them.

A row names what reading that wire takes: the framing of its stream body (SSE for most; AWS's
binary event stream for Bedrock), a stream decoder (one per stream), the decoder of a whole
body, the native stop-reason table and the rule that says when a stream is complete.
Adding a wire is adding a row and its module; nothing else compares wire names.

    wire = wire_for("anthropic")
    framing, decoder = wire.framing(), wire.stream_decoder()
    frames = framing.feed(chunk)               # any chunking of the body's bytes
    obj, events = decoder.decode(frame)        # per frame
    events = decoder.eof()                     # at the end of the body
    events = wire.body_events(body)            # a whole (non-streaming) body
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

from gateway.events import Event, Stop, StopReason
from gateway.formats import (
    anthropic_messages,
    bedrock_converse,
    gemini,
    openai_chat,
    openai_responses,
    stop_reasons,
)
from gateway.formats.shape import token_count
from gateway.formats.sse import SSEDecoder, SSEFrame
from gateway.formats.wire_error import WireError

# What a decoder raises on a frame or body that is not its wire's (orjson's errors and shape
# errors are ValueErrors): a protocol error of the upstream, never a crash of its reader.
UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError)


class Framing(Protocol):
    """Splits a stream body into frames, at any chunking of its bytes. A frame of a framing
    other than SSE is still an SSEFrame: its event name and its payload bytes."""

    def feed(self, chunk: bytes) -> list[SSEFrame]: ...

    def close(self) -> list[SSEFrame]:
        """The end of the body: what it still holds as a whole frame."""
        ...


class StreamDecoder(Protocol):
    def decode(self, frame: SSEFrame) -> tuple[dict[str, Any] | None, list[Event]]:
        """The frame's parsed object (None for a frame that carries none, or one to drop) and
        its events. Raises ValueError (incl. JSON errors), TypeError, KeyError or
        AttributeError when the frame is not this wire's: a protocol error of the upstream."""
        ...

    def eof(self) -> list[Event]:
        """The end of the body: StreamEnd when the wire's completeness rule held, else
        StreamError; nothing when a terminal event was already given."""
        ...


class Completeness(enum.Enum):
    """When a stream of the wire counts as complete."""

    TERMINATOR = "only its terminator event completes it"
    EVERY_CHOICE_FINISHED = "complete once every choice it opened got a finish reason"
    FINISH_REASON = "no terminator: complete once the answer gave its finish reason"


def error_object(parsed: Any, headers: Mapping[str, str]) -> WireError | None:
    """The OpenAI and Anthropic shape: an `error` object with `message`, `type` and `code`;
    None when the body has none."""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return None
    message, kind, code = error.get("message"), error.get("type"), error.get("code")
    inner = error.get("innererror")
    details = None
    if isinstance(inner, dict):
        details = openai_chat.filter_details(inner.get("content_filter_result"))
    return WireError(
        message if isinstance(message, str) else None,
        kind if isinstance(kind, str) else None,
        code if isinstance(code, str) else None,
        details=details,
    )


def google_error_object(parsed: Any, headers: Mapping[str, str]) -> WireError | None:
    """Google's shape: `{"error": {"code", "message", "status", "details"}}`; the type (and the
    code) is the `status` string (`RESOURCE_EXHAUSTED`), the retry-after RetryInfo's delay. A
    list of one such object (what some Google front ends answer) is read as that object."""
    if isinstance(parsed, list) and len(parsed) == 1:
        parsed = parsed[0]
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return None
    message, status, _, retry_after = gemini.error_details(error)
    return WireError(message, status, status, retry_after)


def top_level_extension(obj: dict[str, Any]) -> Any:
    return obj.get("gateway")


def terminal_response_extension(obj: dict[str, Any]) -> Any:
    """A Responses stream carries the object on its terminal event's `response`."""
    response = obj.get("response")
    return response.get("gateway") if isinstance(response, dict) else obj.get("gateway")


@dataclass(frozen=True, slots=True)
class Wire:
    name: str
    stream_decoder: Callable[[], StreamDecoder]
    body_events: Callable[[dict[str, Any]], list[Event]]
    stop_reasons: Mapping[str, StopReason]
    completeness: Completeness
    # Where a frame of this wire carries the gateway's `gateway` object, when the upstream is
    # a gateway (read by `gateway.loop`, which may talk to one).
    extension: Callable[[dict[str, Any]], Any] = top_level_extension
    framing: Callable[[], Framing] = SSEDecoder
    # An error reply's parsed body (any JSON, None when it was not JSON) and headers -> what it
    # says; None when it is not the wire's error shape.
    error_fields: Callable[[Any, Mapping[str, str]], WireError | None] = error_object
    # A token-count answer (the upstream's own count of a request's input) -> the count; None:
    # the wire has no counting, and the gateway estimates.
    token_count: Callable[[Any], int] | None = None
    # A cut answer is continued by an assistant turn holding its text, which the model goes on
    # from (a prefill); else by that turn and a user turn asking to continue
    # (gateway.handlers.recovery).
    prefill: bool = False

    def stop_reason(self, native: object) -> StopReason:
        return stop_reasons.normalized(self.stop_reasons, native)

    def with_stop_reasons(self, own: Mapping[str, StopReason]) -> Wire:
        """The wire as read from an upstream that sends native stop values of its own (a
        provider's quirk flags): `own` on top of the table, for streams and whole bodies."""
        if not own:
            return self
        decoder, body_events = self.stream_decoder, self.body_events
        return replace(
            self,
            stop_reasons={**self.stop_reasons, **own},
            stream_decoder=lambda: OwnStopReasons(decoder(), own),
            body_events=lambda body: restopped(body_events(body), own),
        )


def restopped(events: list[Event], own: Mapping[str, StopReason]) -> list[Event]:
    """`events` with a Stop whose native value is in `own` normalized by it (in place)."""
    for position, event in enumerate(events):
        if type(event) is Stop and event.native in own:
            assert event.native is not None
            events[position] = replace(event, reason=own[event.native])
    return events


class OwnStopReasons:
    """A stream decoder whose Stop events also read an upstream's own native values."""

    __slots__ = ("_inner", "_own")

    def __init__(self, inner: StreamDecoder, own: Mapping[str, StopReason]) -> None:
        self._inner = inner
        self._own = own

    def decode(self, frame: SSEFrame) -> tuple[dict[str, Any] | None, list[Event]]:
        obj, events = self._inner.decode(frame)
        return obj, restopped(events, self._own) if events else events

    def eof(self) -> list[Event]:
        return restopped(self._inner.eof(), self._own)


OPENAI = Wire(
    "openai",
    openai_chat.OpenAIChatDecoder,
    openai_chat.response_events,
    stop_reasons.OPENAI_NATIVE,
    Completeness.EVERY_CHOICE_FINISHED,
)
ANTHROPIC = Wire(
    "anthropic",
    anthropic_messages.AnthropicDecoder,
    anthropic_messages.response_events,
    stop_reasons.ANTHROPIC_NATIVE,
    Completeness.TERMINATOR,
    token_count=partial(token_count, field="input_tokens"),  # POST /v1/messages/count_tokens
    prefill=True,
)

OPENAI_RESPONSES = Wire(
    "openai_responses",
    openai_responses.OpenAIResponsesDecoder,
    openai_responses.response_events,
    stop_reasons.RESPONSES_NATIVE,
    Completeness.TERMINATOR,
    terminal_response_extension,
)

GEMINI = Wire(
    "gemini",
    gemini.GeminiDecoder,
    gemini.response_events,
    stop_reasons.GEMINI_NATIVE,
    Completeness.FINISH_REASON,
    error_fields=google_error_object,
    token_count=partial(token_count, field="totalTokens"),  # countTokens (Vertex AI's too)
)


def aws_event_stream() -> Framing:
    """Bedrock's framing. Its module imports botocore: with the first Bedrock stream, not in
    every process that reads the registry."""
    from gateway.formats.aws_eventstream import EventStreamFraming

    return EventStreamFraming()


BEDROCK = Wire(
    "bedrock",
    bedrock_converse.BedrockConverseDecoder,
    bedrock_converse.response_events,
    stop_reasons.BEDROCK_NATIVE,
    Completeness.FINISH_REASON,  # messageStop; the usage in `metadata` may follow it
    framing=aws_event_stream,
    error_fields=bedrock_converse.error_fields,
    token_count=partial(token_count, field="inputTokens"),  # CountTokens
)

WIRES: Mapping[str, Wire] = {
    wire.name: wire for wire in (OPENAI, ANTHROPIC, OPENAI_RESPONSES, GEMINI, BEDROCK)
}


class UnknownWire(LookupError):
    pass


def wire_for(name: str) -> Wire:
    try:
        return WIRES[name]
    except KeyError:
        known = ", ".join(sorted(WIRES))
        raise UnknownWire(f"unknown wire {name!r} (known: {known})") from None
