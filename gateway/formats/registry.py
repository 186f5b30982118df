"""The upstream wires the gateway reads, one row each; the server and `gateway.loop` share them.

A row names what reading that wire takes: a stream decoder (one per stream), the decoder of a
whole body, the native stop-reason table and the rule that says when a stream is complete.
Adding a wire is adding a row and its module; nothing else compares wire names.

    wire = wire_for("anthropic")
    decoder = wire.stream_decoder()
    obj, events = decoder.decode(frame)        # per SSE frame
    events = decoder.eof()                     # at the end of the body
    events = wire.body_events(body)            # a whole (non-streaming) body
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.events import Event, StopReason
from gateway.formats import anthropic_messages, openai_chat, openai_responses, stop_reasons
from gateway.formats.sse import SSEFrame

# What a decoder raises on a frame or body that is not its wire's (orjson's errors and shape
# errors are ValueErrors): a protocol error of the upstream, never a crash of its reader.
UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError)


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

    def stop_reason(self, native: object) -> StopReason:
        return stop_reasons.normalized(self.stop_reasons, native)


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
)

OPENAI_RESPONSES = Wire(
    "openai_responses",
    openai_responses.OpenAIResponsesDecoder,
    openai_responses.response_events,
    stop_reasons.RESPONSES_NATIVE,
    Completeness.TERMINATOR,
    terminal_response_extension,
)

WIRES: Mapping[str, Wire] = {wire.name: wire for wire in (OPENAI, ANTHROPIC, OPENAI_RESPONSES)}


class UnknownWire(LookupError):
    pass


def wire_for(name: str) -> Wire:
    try:
        return WIRES[name]
    except KeyError:
        known = ", ".join(sorted(WIRES))
        raise UnknownWire(f"unknown wire {name!r} (known: {known})") from None
