"""The typed stream vocabulary every stage shares.

Wire decoders turn upstream frames into these events; the aggregator folds them into one
response; client encoders turn them back into a client's wire format. They are plain slotted
dataclasses: built once per wire chunk, never validated, cheap to create.

    MessageStart -> (TextDelta | ThinkingDelta | RefusalDelta | ToolCallStart
                     | ToolCallDelta | Usage)* -> Stop -> StreamEnd
                 or ... -> StreamError            (the stream broke)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class StopReason(enum.StrEnum):
    """The closed set of normalized stop reasons (DESIGN §3)."""

    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    PAUSE = "pause"
    CONTEXT_WINDOW = "context_window"
    MALFORMED = "malformed"
    ERROR = "error"
    ABORTED = "aborted"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: str) -> StopReason:
        """A value this vocabulary does not know stays UNKNOWN, never STOP."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


CUT_STOP_REASONS = frozenset(
    {StopReason.LENGTH, StopReason.CONTEXT_WINDOW, StopReason.ERROR, StopReason.ABORTED}
)


@dataclass(slots=True)
class MessageStart:
    id: str
    model: str


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ThinkingDelta:
    text: str
    signature: str | None = None


@dataclass(slots=True)
class RefusalDelta:
    text: str


@dataclass(slots=True)
class ToolCallStart:
    """A tool call opened; `index` is its ordinal in the response, from 0, contiguous."""

    index: int
    id: str
    name: str


@dataclass(slots=True)
class ToolCallDelta:
    index: int
    arguments: str


@dataclass(slots=True)
class Usage:
    """Cumulative totals; a later Usage replaces the fields it sets (None leaves them)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(slots=True)
class Stop:
    reason: StopReason
    native: str | None
    stop_sequence: str | None = None
    details: dict[str, Any] | None = None


@dataclass(slots=True)
class StreamEnd:
    """The upstream response is complete by its wire's own rule. `terminator_seen` says whether
    the terminator itself (`[DONE]`, `message_stop`) arrived: an OpenAI stream whose every choice
    got its finish_reason is complete even when `[DONE]` is missing. An incomplete stream ends
    with StreamError instead."""

    terminator_seen: bool


@dataclass(slots=True)
class StreamError:
    """The stream broke: an upstream error event, a lost connection, a missing terminator.

    `kind` says which: "truncated" (the body ended cleanly without the wire's terminator),
    "connection_lost" (the connection was reset or closed before the body's end),
    "upstream_error", "protocol", "timeout", "aborted" (the client left, the server stopped),
    "gateway" (a failure of the gateway's own)."""

    kind: str
    message: str
    error_type: str | None = None
    status: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Event = (
    MessageStart
    | TextDelta
    | ThinkingDelta
    | RefusalDelta
    | ToolCallStart
    | ToolCallDelta
    | Usage
    | Stop
    | StreamEnd
    | StreamError
)
