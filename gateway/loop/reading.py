"""A response, streamed or whole, read into a `Turn` exactly as the gateway reads it.

The loop shares the gateway's vocabulary rather than copying it: the same SSE decoder, the same
wire decoder with its stop-reason table and completeness rule (`gateway.formats.registry`), and
the same aggregator with its order checks. So a response the gateway would call cut is cut here
too, whether the loop talks to the gateway or straight to a provider. Through the gateway, the
`gateway` extension object (the server's own verdict) wins over the wire's value.

    stream = TurnStream(OPENAI)
    for chunk in body: stream.feed(chunk)
    turn = stream.final()
    turn = body_turn(OPENAI, orjson.loads(raw))
"""

from __future__ import annotations

from typing import Any

from gateway.events import Event, Stop, StreamEnd, StreamError
from gateway.formats.registry import UNREADABLE, Wire
from gateway.formats.sse import SSEDecoder, SSEFrame
from gateway.loop.errors import StreamBroken
from gateway.loop.stops import ending, withheld_calls
from gateway.loop.turn import TokenCounts, ToolCall, Turn
from gateway.normalize.aggregate import AggregatedResponse, ChunkAggregator


class TurnStream:
    """Folds one response stream into a Turn; no I/O, so recorded streams can drive it. A stream
    that broke, or ended short of its wire's completeness rule, makes a failed turn that still
    carries what arrived (which the loop never runs)."""

    __slots__ = ("_agg", "_decoder", "_ext", "_native", "_over", "_sse", "_wire")

    def __init__(self, wire: Wire) -> None:
        self._wire = wire
        self._sse = SSEDecoder()
        self._decoder = wire.stream_decoder()
        self._agg = ChunkAggregator()
        self._ext: Any = None  # the gateway's extension object, when a frame carried one
        self._native: str | None = None  # the last native stop value seen
        self._over = False

    def feed(self, chunk: bytes) -> None:
        for frame in self._sse.feed(chunk):
            self._frame(frame)

    def close(self) -> None:
        """The body ended."""
        for frame in self._sse.close():
            self._frame(frame)
        if not self._over:
            self._events(self._decoder.eof())

    def broken(self, error: StreamBroken) -> None:
        """The transport failed mid-body."""
        self._events([StreamError("truncated", error.message, error.error_type)])

    def _frame(self, frame: SSEFrame) -> None:
        if self._over:
            return
        try:
            obj, events = self._decoder.decode(frame)
        except UNREADABLE as exc:
            problem = f"the stream sent an unreadable event ({type(exc).__name__})"
            obj, events = None, [StreamError("protocol", problem)]
        if isinstance(obj, dict):
            ext = self._wire.extension(obj)
            if ext is not None:
                self._ext = ext
        self._events(events)

    def _events(self, events: list[Event]) -> None:
        for event in events:
            if self._over:
                return
            if isinstance(event, Stop):
                self._native = event.native
            problem = self._agg.handle(event)
            self._over = problem is not None or isinstance(event, StreamEnd | StreamError)

    def final(self) -> Turn:
        if not self._over:
            self.close()
        return turn_of(self._agg.final(), self._ext, self._native)


def body_turn(wire: Wire, body: Any) -> Turn:
    """A whole response body; raises ValueError, TypeError, KeyError or AttributeError when the
    body is not the wire's."""
    if not isinstance(body, dict):
        raise TypeError("the body is not an object")
    agg = ChunkAggregator()
    for event in wire.body_events(body):
        if agg.handle(event) is not None:
            break
    resp = agg.final()
    return turn_of(resp, body.get("gateway"), resp.native_stop_reason, raw=body)


def turn_of(resp: AggregatedResponse, ext: Any, native: str | None, raw: Any = None) -> Turn:
    calls = tuple(ToolCall.from_json(c.id, c.name, c.arguments) for c in resp.tool_calls)
    tokens = TokenCounts(resp.usage.input_tokens or 0, resp.usage.output_tokens or 0)
    if resp.error is not None:
        ext_native = ext.get("native_stop_reason") if isinstance(ext, dict) else None
        return Turn.failed(
            StreamBroken(resp.error.message, resp.error.error_type),
            native=ext_native if isinstance(ext_native, str) else native,
            text=resp.text,
            tool_calls=calls,
            withheld=withheld_calls(ext),
            raw=raw,
            tokens=tokens,
        )
    end = ending(ext, resp.native_stop_reason, resp.stop_reason)
    return Turn(
        resp.text,
        calls,
        end.stop_reason,
        end.native,
        end.truncated,
        end.withheld,
        refusal=resp.refusal,
        raw=raw,
        tokens=tokens,
    )
