"""The OpenAI Chat Completions wire: history -> `messages`; a response (whole or streamed) is
read by `gateway.loop.reading` with the gateway's own decoder for the wire.

    model = OpenAIChatClient("http://127.0.0.1:8080/v1", api_key="unused", model="gpt-4o")

OpenAI tool messages have no error flag: an error result is sent as `Error: <content>`, the
convention the gateway's own Anthropic-to-OpenAI translation uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.formats.registry import OPENAI
from gateway.loop.conversation import AssistantMessage, Message, ToolResult, UserMessage
from gateway.loop.http import HTTPModelClient
from gateway.loop.model import ModelRequest
from gateway.loop.turn import ToolCall

Json = dict[str, Any]


def _user(message: UserMessage) -> Json:
    return {"role": "user", "content": message.text}


def _assistant(message: AssistantMessage) -> Json:
    out: Json = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        out["tool_calls"] = [_call(call) for call in message.tool_calls]
    elif not message.text:
        out["content"] = ""
    return out


def _call(call: ToolCall) -> Json:
    # Arguments that do not parse are sent as `{}`: a server (or the gateway translating to
    # another wire) may reject the whole request for them, and the error result says why.
    valid = call.parsed is not None and call.arguments.strip()
    arguments = call.arguments if valid else "{}"
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _tool_result(message: ToolResult) -> Json:
    content = f"Error: {message.content}" if message.is_error else message.content
    return {"role": "tool", "tool_call_id": message.call_id, "content": content}


_ENCODERS: dict[type[Any], Callable[[Any], Json]] = {
    UserMessage: _user,
    AssistantMessage: _assistant,
    ToolResult: _tool_result,
}


def encode_messages(history: list[Message] | tuple[Message, ...], system: str | None) -> list[Json]:
    head = [{"role": "system", "content": system}] if system else []
    return head + [_ENCODERS[type(message)](message) for message in history]


class OpenAIChatCodec:
    path = "/chat/completions"
    wire = OPENAI

    def __init__(self, max_tokens_field: str = "max_completion_tokens") -> None:
        self.max_tokens_field = max_tokens_field

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def request_body(
        self, request: ModelRequest, model: str, max_tokens: int, stream: bool
    ) -> Json:
        body: Json = {
            "model": model,
            "messages": encode_messages(tuple(request.messages), request.system),
            self.max_tokens_field: max_tokens,
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}  # token counts for the result
        return body


class OpenAIChatClient(HTTPModelClient):
    """A model behind an OpenAI-compatible `/chat/completions` (base_url ends in `/v1`).

    `max_tokens_field`: `max_completion_tokens` (OpenAI's current name) or `max_tokens` for
    servers that only know the older one.
    """

    codec_type = OpenAIChatCodec

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        max_tokens_field: str = "max_completion_tokens",
        **options: Any,
    ) -> None:
        super().__init__(
            base_url, api_key, model, codec=OpenAIChatCodec(max_tokens_field), **options
        )
