"""The Anthropic Messages wire: history -> `messages` content blocks, and a response (whole or
streamed) -> `Turn`.

    model = AnthropicMessagesClient("http://127.0.0.1:8080", api_key="unused", model="claude-x")

Consecutive history entries of one role share one message: the tool results answering an
assistant turn go together, first, in the user message that follows it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.loop.errors import StreamBroken
from gateway.loop.http import HTTPModelClient
from gateway.loop.messages import AssistantMessage, Message, ToolResult, UserMessage
from gateway.loop.model import ModelRequest
from gateway.loop.stops import ANTHROPIC_NATIVE, ending, withheld_calls
from gateway.loop.turn import ToolCall, Turn

Json = dict[str, Any]
ANTHROPIC_VERSION = "2023-06-01"


def _user(message: UserMessage) -> tuple[str, list[Json]]:
    return "user", [{"type": "text", "text": message.text}]


def _assistant(message: AssistantMessage) -> tuple[str, list[Json]]:
    blocks: list[Json] = [{"type": "text", "text": message.text}] if message.text else []
    blocks += [
        {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.parsed if call.parsed is not None else {},
        }
        for call in message.tool_calls
    ]
    return "assistant", blocks


def _tool_result(message: ToolResult) -> tuple[str, list[Json]]:
    block = {
        "type": "tool_result",
        "tool_use_id": message.call_id,
        "content": message.content,
        "is_error": message.is_error,
    }
    return "user", [block]


_ENCODERS: dict[type[Any], Callable[[Any], tuple[str, list[Json]]]] = {
    UserMessage: _user,
    AssistantMessage: _assistant,
    ToolResult: _tool_result,
}


def encode_messages(history: Sequence[Message]) -> list[Json]:
    out: list[Json] = []
    for message in history:
        role, blocks = _ENCODERS[type(message)](message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def parse_body(body: Any) -> Turn:
    content = body["content"]
    if not isinstance(content, list):
        raise TypeError("content is not a list")
    text = "".join(b.get("text") or "" for b in content if b.get("type") == "text")
    calls = tuple(
        ToolCall.from_object(str(b.get("id") or ""), str(b.get("name") or ""), b.get("input"))
        for b in content
        if b.get("type") == "tool_use"
    )
    native = body.get("stop_reason")
    end = ending(body.get("gateway"), native if isinstance(native, str) else None, ANTHROPIC_NATIVE)
    return Turn(text, calls, end.stop_reason, end.native, end.truncated, end.withheld, raw=body)


@dataclass
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)  # text, or the tool input's JSON pieces


class AnthropicStream:
    """Folds Messages stream events into a Turn. Complete at `message_stop`; an `error` event,
    or an end without `message_stop`, makes a failed turn that still carries what arrived
    (which the loop never runs)."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.stop: str | None = None
        self.ext: Any = None
        self.done = False
        self.error: StreamBroken | None = None

    def handle(self, event: str, data: str) -> None:
        if self.error is not None:
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.broken(StreamBroken("the stream sent an unreadable event"))
            return
        if not isinstance(obj, dict):
            self.broken(StreamBroken("the stream sent an event that is not an object"))
            return
        handler = _HANDLERS.get(str(obj.get("type") or event))
        if handler is not None:
            handler(self, obj)

    def _block_start(self, obj: Json) -> None:
        block = obj.get("content_block") or {}
        entry = _Block(
            str(block.get("type")), str(block.get("id") or ""), str(block.get("name") or "")
        )
        if entry.kind == "tool_use" and block.get("input"):
            entry.parts.append(orjson.dumps(block["input"]).decode())
        self.blocks[obj.get("index", len(self.blocks))] = entry

    def _block_delta(self, obj: Json) -> None:
        block = self.blocks.get(obj.get("index", -1))
        delta = obj.get("delta") or {}
        if block is None:
            return
        if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
            block.parts.append(delta["text"])
        elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block.parts.append(delta["partial_json"])

    def _message_delta(self, obj: Json) -> None:
        stop = (obj.get("delta") or {}).get("stop_reason")
        self.stop = stop if isinstance(stop, str) else self.stop
        self.ext = obj.get("gateway", self.ext)

    def _message_stop(self, obj: Json) -> None:
        self.done = True

    def _error(self, obj: Json) -> None:
        self.ext = obj.get("gateway", self.ext)
        error = obj.get("error") or {}
        kind = error.get("type")
        self.broken(StreamBroken(str(error.get("message") or "stream error"), kind or None))

    def broken(self, error: StreamBroken) -> None:
        if self.error is None:
            self.error = error

    def final(self) -> Turn:
        ordered = [b for _, b in sorted(self.blocks.items())]
        text = "".join("".join(b.parts) for b in ordered if b.kind == "text")
        calls = tuple(
            ToolCall.from_json(b.id, b.name, "".join(b.parts))
            for b in ordered
            if b.kind == "tool_use"
        )
        if self.error is None and not self.done:
            self.error = StreamBroken("the stream ended without message_stop")
        if self.error is not None:
            native = self.ext.get("native_stop_reason") if isinstance(self.ext, dict) else None
            return Turn.failed(
                self.error,
                native=native if isinstance(native, str) else self.stop,
                text=text,
                tool_calls=calls,
                withheld=withheld_calls(self.ext),
            )
        end = ending(self.ext, self.stop, ANTHROPIC_NATIVE)
        return Turn(text, calls, end.stop_reason, end.native, end.truncated, end.withheld)


_HANDLERS: dict[str, Callable[[AnthropicStream, Json], None]] = {
    "content_block_start": AnthropicStream._block_start,
    "content_block_delta": AnthropicStream._block_delta,
    "message_delta": AnthropicStream._message_delta,
    "message_stop": AnthropicStream._message_stop,
    "error": AnthropicStream._error,
}


class AnthropicMessagesCodec:
    path = "/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        key = {"x-api-key": api_key} if api_key else {}
        return {"anthropic-version": ANTHROPIC_VERSION, **key}

    def request_body(
        self, request: ModelRequest, model: str, max_tokens: int, stream: bool
    ) -> Json:
        body: Json = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": encode_messages(request.messages),
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.parameters),
                }
                for tool in request.tools
            ]
        if stream:
            body["stream"] = True
        return body

    def parse_body(self, body: Any) -> Turn:
        return parse_body(body)

    def stream_state(self) -> AnthropicStream:
        return AnthropicStream()


class AnthropicMessagesClient(HTTPModelClient):
    """A model behind an Anthropic-compatible `/v1/messages` (base_url without `/v1`)."""

    codec_type = AnthropicMessagesCodec
