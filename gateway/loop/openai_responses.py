"""The OpenAI Responses wire: history -> `input` items; a response (whole or streamed) is read by
`gateway.loop.reading` with the gateway's own decoder for the wire.

    model = OpenAIResponsesClient("http://127.0.0.1:8080/v1", api_key="unused", model="gpt-x")

The loop keeps its own history, so every request carries the whole conversation with
`store: false` (nothing is chained upstream). An assistant turn is a message item and then one
`function_call` item per call; each result is a `function_call_output` with the call's id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gateway.formats.registry import OPENAI_RESPONSES
from gateway.loop.conversation import AssistantMessage, Message, ToolResult, UserMessage
from gateway.loop.http import HTTPModelClient
from gateway.loop.model import ModelRequest

Json = dict[str, Any]


def _user(message: UserMessage) -> list[Json]:
    return [{"role": "user", "content": message.text}]


def _assistant(message: AssistantMessage) -> list[Json]:
    items: list[Json] = []
    if message.text:
        part = {"type": "output_text", "text": message.text}
        items.append({"type": "message", "role": "assistant", "content": [part]})
    items += [
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments or "{}",
        }
        for call in message.tool_calls
    ]
    return items


def _tool_result(message: ToolResult) -> list[Json]:
    # The wire has no error flag: an error result says so in its text, as on Chat Completions.
    output = f"Error: {message.content}" if message.is_error else message.content
    return [{"type": "function_call_output", "call_id": message.call_id, "output": output}]


_ENCODERS: dict[type[Any], Callable[[Any], list[Json]]] = {
    UserMessage: _user,
    AssistantMessage: _assistant,
    ToolResult: _tool_result,
}


def encode_input(history: Sequence[Message]) -> list[Json]:
    return [item for message in history for item in _ENCODERS[type(message)](message)]


class OpenAIResponsesCodec:
    path = "/responses"
    wire = OPENAI_RESPONSES

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def request_body(
        self, request: ModelRequest, model: str, max_tokens: int, stream: bool
    ) -> Json:
        body: Json = {
            "model": model,
            "input": encode_input(request.messages),
            "max_output_tokens": max_tokens,
            "store": False,
        }
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": False,  # the loop checks arguments itself; Responses defaults on
                }
                for tool in request.tools
            ]
        if stream:
            body["stream"] = True
        return body


class OpenAIResponsesClient(HTTPModelClient):
    """A model behind an OpenAI-compatible `/responses` (base_url ends in `/v1`)."""

    codec_type = OpenAIResponsesCodec
