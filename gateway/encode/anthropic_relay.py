"""Anthropic client <- Anthropic-wire upstream, streaming: a passthrough with three exceptions.

Frames go out as the upstream sent them until the first `tool_use` block starts; from there the
frames of blocks that start are held, and so is `message_delta`, until `message_stop` proves the
stream complete. Then the held frames are released (or, for a cut response under `withhold`,
released without the tool blocks and with the later blocks renumbered so the indexes stay
contiguous), blocks the upstream left open are closed, and `message_delta` gains the `gateway`
object. A broken stream ends with an `error` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway.encode import Parsed, ReplyTerms
from gateway.encode.anthropic_errors import stream_frame
from gateway.encode.anthropic_stream import AnthropicMessagesWriter
from gateway.events import Event, StreamError
from gateway.formats.sse import SSEFrame, encode
from gateway.formats.stop_reasons import relayed, to_anthropic
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict

BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


STOP_FRAME = {"type": "message_stop"}


class AnthropicRelay:
    __slots__ = (
        "_held",
        "_held_blocks",
        "_held_stop",
        "_last",
        "_open",
        "_stop",
        "_terms",
        "_tool_blocks",
    )

    def __init__(self, terms: ReplyTerms) -> None:
        self._terms = terms
        self._held: list[tuple[str, dict[str, Any], bytes]] = []
        self._held_blocks: set[int] = set()
        self._tool_blocks: set[int] = set()
        self._open: list[int] = []  # blocks started and not stopped, in order
        self._stop: dict[str, Any] = STOP_FRAME  # the upstream's own message_stop, once seen
        self._last: tuple[int, str | None] = (-1, None)  # the last block started, its type
        # When the exchange may continue the answer: the stop of its last text block, sent when
        # anything but the message's end follows, so a continuation's text goes on in it.
        self._held_stop = b""

    def feed(self, frame: SSEFrame | None, obj: Parsed, events: Sequence[Event]) -> bytes:
        if obj is None or frame is None:
            return b""
        kind = obj.get("type") or frame.event or ""
        if kind == "message_delta":
            self._held.append((kind, obj, frame.data))
            return b""
        if kind == "message_stop":
            self._stop = obj  # sent by end(), after the held frames
            return b""
        before = self._take_stop() if self._held_stop else b""
        if kind in BLOCK_EVENTS:
            return before + self._block(kind, obj, frame)
        if self._held_blocks:
            self._held.append((kind, obj, frame.data))
            return before
        return before + encode(frame.data, kind)

    def _take_stop(self) -> bytes:
        stop, self._held_stop = self._held_stop, b""
        return stop

    def _block(self, kind: str, obj: dict[str, Any], frame: SSEFrame) -> bytes:
        index = obj.get("index", -1)
        if kind == "content_block_start":
            self._open.append(index)
            block_type = (obj.get("content_block") or {}).get("type")
            self._last = (index, block_type)
            if block_type == "tool_use":
                self._tool_blocks.add(index)
            if self._tool_blocks:
                self._held_blocks.add(index)
        elif kind == "content_block_stop" and index in self._open:
            self._open.remove(index)
            if self._terms.splices is not None and self._last == (index, "text"):
                self._held_stop = encode(frame.data, kind)
                return b""
        if index in self._held_blocks:
            self._held.append((kind, obj, frame.data))
            return b""
        return encode(frame.data, kind)

    def end(self, verdict: Verdict, response: AggregatedResponse) -> bytes:
        deltas = [obj for kind, obj, _ in self._held if kind == "message_delta"]
        delta = deltas[-1] if deltas else {"type": "message_delta", "delta": {}, "usage": {}}
        out = [self._take_stop(), self._release(verdict)]
        self._finish_delta(delta, verdict, response)
        out.append(encode(orjson.dumps(delta), "message_delta"))
        out.append(encode(orjson.dumps(self._stop), "message_stop"))
        return b"".join(out)

    def _finish_delta(
        self, message_delta: dict[str, Any], verdict: Verdict, response: AggregatedResponse
    ) -> None:
        delta = message_delta.setdefault("delta", {})
        shown = to_anthropic(
            verdict.stop_reason, verdict.delivered_tool_calls, response.stop_sequence
        )
        delta["stop_reason"] = relayed(verdict.stop_reason, verdict.native_stop_reason, shown)
        message_delta["gateway"] = self._terms.extension(verdict)

    def _release(self, verdict: Verdict) -> bytes:
        """Held block frames (minus withheld tool blocks), then stops for blocks left open."""
        dropped = set() if verdict.deliver_tool_calls else self._tool_blocks
        out: list[bytes] = []
        for kind, obj, data in self._held:
            if kind == "message_delta":
                continue
            index = obj.get("index")
            if index in dropped:
                continue
            if dropped and isinstance(index, int):
                obj["index"] = index - sum(1 for t in dropped if t < index)
                data = orjson.dumps(obj)
            out.append(encode(data, kind))
        for index in self._open:
            if index not in dropped:
                shift = sum(1 for t in dropped if t < index)
                stop = {"type": "content_block_stop", "index": index - shift}
                out.append(encode(orjson.dumps(stop), "content_block_stop"))
        self._held = []
        return b"".join(out)

    def fail(self, error: StreamError, verdict: Verdict, response: AggregatedResponse) -> bytes:
        self._open = []  # an error event ends the stream; no block needs closing after it
        released = self._take_stop() + self._release(verdict)
        return released + stream_frame(error, self._terms.extension(verdict))

    def resume(self) -> AnthropicMessagesWriter:
        """Events writer for the continuation: its text goes on in the last block when that is
        an open text block (another open block is closed first); no tool block was streamed."""
        index, block_type = self._last
        still_open = index in self._open or bool(self._held_stop)
        return AnthropicMessagesWriter.continuing(
            self._terms, index, block_type if still_open else None
        )
