"""OpenAI client <- events (an upstream of another wire): Chat Completions chunks.

Text, reasoning and refusal deltas stream live. Tool calls are held (the aggregator has them)
until the upstream stream is over, then sent one chunk per call with its whole arguments, or
withheld when the response was cut. The finish chunk carries the client's finish_reason,
`native_finish_reason` and the `gateway` object; a usage chunk follows when the client asked for
one; then `[DONE]`. A broken stream ends with an error chunk instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.encode import Parsed, ReplyTerms
from gateway.encode.openai_errors import stream_frame
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
from gateway.formats.stop_reasons import to_openai
from gateway.normalize.aggregate import AggregatedResponse
from gateway.normalize.truncation import Verdict

DONE_FRAME = b"data: [DONE]\n\n"
# A content chunk, up to its delta's members: its id, creation time and model.
CHUNK_HEAD = (
    b'data: {"id":%b,"object":"chat.completion.chunk","created":%d,"model":%b,'
    b'"choices":[{"index":0,"delta":{'
)
CHUNK_TAIL = b'},"logprobs":null,"finish_reason":null}]}\n\n'


def usage_body(usage: Usage) -> dict[str, Any]:
    prompt = usage.input_tokens or 0
    completion = usage.output_tokens or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens or 0},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
    }


class OpenAIChatWriter:
    __slots__ = ("_created", "_head", "_id", "_model", "_started", "_terms")

    def __init__(self, terms: ReplyTerms) -> None:
        self._terms = terms
        self._model = terms.model
        self._id = "chatcmpl-" + terms.request_id
        self._created = int(time.time())
        self._head = b""
        self._started = False

    @classmethod
    def continuing(
        cls, terms: ReplyTerms, chunk_id: str, model: str, created: int
    ) -> OpenAIChatWriter:
        """A writer for the rest of a stream another writer started (the relay of an OpenAI
        upstream), with that stream's id, model and creation time; the role was sent."""
        writer = cls(terms)
        writer._created = created
        writer._start(MessageStart(chunk_id, model))
        return writer

    def resume(self) -> OpenAIChatWriter:
        return self

    def feed(self, frame: SSEFrame | None, obj: Parsed, events: Sequence[Event]) -> bytes:
        out: list[bytes] = []
        for event in events:
            match event:
                case TextDelta(text=text):
                    out.append(self._delta(b'"content":', text))
                case ThinkingDelta(text=text) if text:
                    out.append(self._delta(b'"reasoning_content":', text))
                case RefusalDelta(text=text):
                    out.append(self._delta(b'"refusal":', text))
                case MessageStart():
                    out.append(self._start(event))
        return b"".join(out)

    def _start(self, event: MessageStart) -> bytes:
        if self._started:
            return b""
        self._started = True
        if event.id:
            self._id = event.id
        self._model = event.model or self._model
        self._head = CHUNK_HEAD % (orjson.dumps(self._id), self._created, orjson.dumps(self._model))
        return b"".join((self._head, b'"role":"assistant","content":""', CHUNK_TAIL))

    def _delta(self, key: bytes, text: str) -> bytes:
        prefix = b"" if self._started else self._start(MessageStart("", ""))
        return b"".join((prefix, self._head, key, orjson.dumps(text), CHUNK_TAIL))

    def _chunk(self, choice: dict[str, Any] | None, **extra: Any) -> bytes:
        body = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [choice] if choice is not None else [],
            **extra,
        }
        return encode(orjson.dumps(body))

    def _tool_chunks(self, response: AggregatedResponse) -> bytes:
        out = []
        for call in response.tool_calls:
            fn = {"name": call.name, "arguments": call.arguments or "{}"}
            delta = {
                "tool_calls": [
                    {"index": call.index, "id": call.id, "type": "function", "function": fn}
                ]
            }
            out.append(
                self._chunk({"index": 0, "delta": delta, "logprobs": None, "finish_reason": None})
            )
        return b"".join(out)

    def end(self, verdict: Verdict, response: AggregatedResponse) -> bytes:
        prefix = b"" if self._started else self._start(MessageStart("", ""))
        tools = self._tool_chunks(response) if verdict.delivered_tool_calls else b""
        delta: dict[str, Any] = {}
        if response.stop_details and verdict.stop_reason is StopReason.REFUSAL:
            explanation = response.stop_details.get("explanation")
            if explanation:
                delta["refusal"] = explanation
        finish = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": to_openai(verdict.stop_reason, verdict.delivered_tool_calls),
            "native_finish_reason": verdict.native_stop_reason,
        }
        out = [prefix, tools, self._chunk(finish, gateway=self._terms.extension(verdict))]
        if self._terms.include_usage:
            out.append(self._chunk(None, usage=usage_body(response.usage)))
        out.append(DONE_FRAME)
        return b"".join(out)

    def fail(self, error: StreamError, verdict: Verdict, response: AggregatedResponse) -> bytes:
        tools = self._tool_chunks(response) if verdict.delivered_tool_calls else b""
        return tools + stream_frame(error, self._terms.extension(verdict))
