"""Anthropic client <- events (an upstream of another wire): Messages stream events.

Text and thinking stream live as blocks. Tool calls are held (the aggregator has them) until the
upstream stream is over, then sent as `tool_use` blocks, or withheld when the response was cut.
`message_delta` carries the client's stop_reason, usage and the `gateway` object; then
`message_stop`. A broken stream ends with an `error` event instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway.encode import Parsed, ReplyTerms
from gateway.encode.anthropic_errors import stream_frame
from gateway.events import (
    Event,
    MessageStart,
    RefusalDelta,
    StopReason,
    StreamError,
    TextDelta,
    ThinkingDelta,
    Usage,
)
from gateway.formats.sse import SSEFrame, encode
from gateway.formats.stop_reasons import to_anthropic
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict

# A content block delta: the block's index, the delta's type and key, its text's JSON.
DELTA = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
    b'"delta":{"type":%b%b}}\n\n'
)
THINKING_BLOCK = {"type": "thinking", "thinking": "", "signature": ""}


def usage_body(usage: Usage) -> dict[str, Any]:
    read = usage.cache_read_tokens or 0
    created = usage.cache_creation_tokens or 0
    body: dict[str, Any] = {
        "input_tokens": max((usage.input_tokens or 0) - read - created, 0),
        "output_tokens": usage.output_tokens or 0,
    }
    if usage.cache_read_tokens is not None:
        body["cache_read_input_tokens"] = read
    if usage.cache_creation_tokens is not None:
        body["cache_creation_input_tokens"] = created
    return body


def stop_details(verdict: Verdict) -> dict[str, Any] | None:
    if verdict.stop_reason is StopReason.CONTENT_FILTER:
        return {"type": "refusal", "category": None, "explanation": verdict.native_stop_reason}
    return None


def message_start(message_id: str, model: str) -> bytes:
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    return encode(orjson.dumps({"type": "message_start", "message": message}), "message_start")


class AnthropicMessagesWriter:
    __slots__ = ("_block", "_index", "_model", "_started", "_terms")

    def __init__(self, terms: ReplyTerms) -> None:
        self._terms = terms
        self._model = terms.model
        self._started = False
        self._index = -1  # index of the last block opened
        self._block: str | None = None  # type of the open block

    @classmethod
    def continuing(
        cls, terms: ReplyTerms, last_index: int, open_block: str | None
    ) -> AnthropicMessagesWriter:
        """A writer for the rest of a stream another writer started (the relay of an Anthropic
        upstream): `last_index`, its last block; `open_block`, that block's type if it is still
        open (text goes on in an open text block)."""
        writer = cls(terms)
        writer._started = True
        writer._index = last_index
        writer._block = open_block
        return writer

    def resume(self) -> AnthropicMessagesWriter:
        return self

    def feed(self, frame: SSEFrame | None, obj: Parsed, events: Sequence[Event]) -> bytes:
        out: list[bytes] = []
        for event in events:
            match event:
                case TextDelta(text=text) | RefusalDelta(text=text):
                    out.append(self._delta("text", b'"text_delta","text":', text))
                case ThinkingDelta(text=text, signature=signature):
                    if text:
                        out.append(self._delta("thinking", b'"thinking_delta","thinking":', text))
                    if signature:
                        key = b'"signature_delta","signature":'
                        out.append(self._delta("thinking", key, signature))
                case MessageStart(id=message_id, model=model):
                    out.append(self._start(message_id, model))
        return b"".join(out)

    def _start(self, message_id: str, model: str) -> bytes:
        if self._started:
            return b""
        self._started = True
        return message_start(message_id or "msg_" + self._terms.request_id, model or self._model)

    def _delta(self, block: str, key: bytes, text: str) -> bytes:
        out = b"" if self._started else self._start("", "")
        if self._block != block:
            opened = {"type": "text", "text": ""} if block == "text" else THINKING_BLOCK
            out += self._close() + self._open(opened)
        delta = DELTA % (self._index, key, orjson.dumps(text))
        return out + delta if out else delta

    def _open(self, block: dict[str, Any]) -> bytes:
        self._index += 1
        self._block = block["type"]
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        return encode(orjson.dumps(start), "content_block_start")

    def _close(self) -> bytes:
        if self._block is None:
            return b""
        self._block = None
        stop = b'{"type":"content_block_stop","index":%d}' % self._index
        return encode(stop, "content_block_stop")

    def _tool_blocks(self, response: AggregatedResponse) -> bytes:
        out = [self._close()]
        for call in response.tool_calls:
            out.append(
                self._open({"type": "tool_use", "id": call.id, "name": call.name, "input": {}})
            )
            if call.arguments:
                delta = {
                    "type": "content_block_delta",
                    "index": self._index,
                    "delta": {"type": "input_json_delta", "partial_json": call.arguments},
                }
                out.append(encode(orjson.dumps(delta), "content_block_delta"))
            out.append(self._close())
        return b"".join(out)

    def end(self, verdict: Verdict, response: AggregatedResponse) -> bytes:
        out = [b"" if self._started else self._start("", "")]
        out.append(self._tool_blocks(response) if verdict.delivered_tool_calls else self._close())
        delta: dict[str, Any] = {
            "stop_reason": to_anthropic(
                verdict.stop_reason, verdict.delivered_tool_calls, response.stop_sequence
            ),
            "stop_sequence": response.stop_sequence,
        }
        details = stop_details(verdict)
        if details:
            delta["stop_details"] = details
        message_delta = {
            "type": "message_delta",
            "delta": delta,
            "usage": usage_body(response.usage),
            "gateway": self._terms.extension(verdict),
        }
        out.append(encode(orjson.dumps(message_delta), "message_delta"))
        out.append(encode(b'{"type":"message_stop"}', "message_stop"))
        return b"".join(out)

    def fail(self, error: StreamError, verdict: Verdict, response: AggregatedResponse) -> bytes:
        tools = self._tool_blocks(response) if verdict.delivered_tool_calls else b""
        return tools + stream_frame(error, self._terms.extension(verdict))
