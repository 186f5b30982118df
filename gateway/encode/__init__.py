"""Client-side encoders: what a client of each format receives, streamed or whole.

A stream writer belongs to one attempt. It is built from the reply's terms, fed each upstream
frame with its parsed object and its live events (never a terminal one), and at the end told how
the stream ended, with the verdict and the folded response as arguments. It never reads the
exchange: everything it knows comes through these calls, so a retry simply builds another one.

    writer = client.writer(terms)
    out = writer.feed(frame, obj, events)       # live events of one upstream frame
    out = writer.end(verdict, response)         # the stream completed by its wire's rule
    out = writer.fail(error, verdict, response) # it broke after the first byte reached the client
    writer = writer.resume()                    # instead of end/fail: a continuation follows
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.events import Event, StopReason, StreamError
from gateway.formats.sse import SSEFrame
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.splice import Splices
from gateway.normalize.truncation import Policy, Verdict, extension, judge
from gateway.translate.translation import NOTHING_DROPPED, Dropped, ToolOrigin

Parsed = dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ReplyTerms:
    """What an encoder needs to know of the reply it renders, fixed when the attempt starts."""

    request_id: str
    provider: str
    model: str  # the client's model name, shown when the upstream names none
    policy: Policy
    include_usage: bool = False  # an OpenAI client asked for stream_options.include_usage
    dropped: Dropped = NOTHING_DROPPED  # what the request translation could not carry
    tools: Mapping[str, ToolOrigin] = field(default_factory=dict)  # tools the translation reshaped
    response_id: str | None = None  # minted by the gateway, for formats whose answers carry one
    echo: Mapping[str, Any] = field(default_factory=dict)  # request fields the answer repeats
    encrypted_reasoning: bool = False  # a Responses client asked for reasoning.encrypted_content
    # The route continues cut streams (gateway.handlers.recovery): what was spliced so far.
    splices: Splices | None = None

    def extension(self, verdict: Verdict) -> dict[str, Any]:
        ext = extension(verdict, self.provider, self.request_id)
        dropped = self.dropped
        if dropped.fields:
            ext["dropped_fields"] = list(dropped.fields)
        if dropped.tools or dropped.items:
            ext["dropped"] = {"tools": list(dropped.tools), "input_items": dict(dropped.items)}
        recovered = self.splices.summary() if self.splices is not None else None
        if recovered is not None:
            ext["recovered"] = recovered
        return ext

    def judge(
        self, reason: StopReason, native: str | None, calls: Sequence[tuple[str, str]]
    ) -> Verdict:
        """The verdict on one choice, judged where it ends (OpenAI relays, n > 1)."""
        return judge(reason, native, None, calls, self.policy)


class StreamWriter(Protocol):
    def feed(self, frame: SSEFrame | None, obj: Parsed, events: Sequence[Event]) -> bytes: ...

    def resume(self) -> StreamWriter:
        """The writer for a continuation of this stream's answer (gateway.handlers.recovery),
        whose events go on where this one's stopped; its ending was not written."""
        ...

    def end(self, verdict: Verdict, response: AggregatedResponse) -> bytes: ...

    def fail(self, error: StreamError, verdict: Verdict, response: AggregatedResponse) -> bytes: ...
