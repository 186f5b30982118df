"""The Anthropic Messages wire: history -> `messages` content blocks; a response (whole or
streamed) is read by `gateway.loop.reading` with the gateway's own decoder for the wire.

    model = AnthropicMessagesClient("http://127.0.0.1:8080", api_key="unused", model="claude-x")

Consecutive history entries of one role share one message: the tool results answering an
assistant turn go together, first, in the user message that follows it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gateway.formats.registry import ANTHROPIC
from gateway.loop.conversation import AssistantMessage, Message, ToolResult, UserMessage
from gateway.loop.http import HTTPModelClient
from gateway.loop.model import ModelRequest

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


class AnthropicMessagesCodec:
    path = "/v1/messages"
    wire = ANTHROPIC

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


class AnthropicMessagesClient(HTTPModelClient):
    """A model behind an Anthropic-compatible `/v1/messages` (base_url without `/v1`)."""

    codec_type = AnthropicMessagesCodec
