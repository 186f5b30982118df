"""The OpenAI Chat Completions wire: history -> `messages`, and a response (whole or streamed)
-> `Turn`.

    model = OpenAIChatClient("http://127.0.0.1:8080/v1", api_key="unused", model="gpt-4o")

OpenAI tool messages have no error flag: an error result is sent as `Error: <content>`, the
convention the gateway's own Anthropic-to-OpenAI translation uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.loop.errors import StreamBroken
from gateway.loop.http import HTTPModelClient
from gateway.loop.messages import AssistantMessage, Message, ToolResult, UserMessage
from gateway.loop.model import ModelRequest
from gateway.loop.stops import OPENAI_NATIVE, ending, withheld_calls
from gateway.loop.turn import ToolCall, Turn

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


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return ""


def _tool_call(call: Json) -> ToolCall:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else orjson.dumps(arguments).decode()
    return ToolCall.from_json(str(call.get("id") or ""), str(function.get("name") or ""), arguments)


def parse_body(body: Any) -> Turn:
    choice = body["choices"][0]
    message = choice.get("message") or {}
    calls = tuple(_tool_call(c) for c in message.get("tool_calls") or ())
    finish = choice.get("finish_reason")
    end = ending(body.get("gateway"), finish if isinstance(finish, str) else None, OPENAI_NATIVE)
    return Turn(
        _text(message.get("content")),
        calls,
        end.stop_reason,
        end.native,
        end.truncated,
        end.withheld,
        refusal=message.get("refusal") or "",
        raw=body,
    )


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIStream:
    """Folds `chat.completion.chunk` events (choice 0) into a Turn. Complete once the choice got
    its finish_reason; an error event, or an end without one, makes a failed turn that still
    carries what arrived (which the loop never runs)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.slots: dict[int, _Slot] = {}
        self.finish: str | None = None
        self.ext: Any = None
        self.error: StreamBroken | None = None

    def handle(self, event: str, data: str) -> None:
        if self.error is not None or data == "[DONE]":
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.broken(StreamBroken("the stream sent an unreadable event"))
            return
        if not isinstance(chunk, dict):
            self.broken(StreamBroken("the stream sent an event that is not an object"))
            return
        self.ext = chunk.get("gateway", self.ext)
        error = chunk.get("error")
        if isinstance(error, dict):
            kind = error.get("type")
            message = error.get("message")
            self.broken(StreamBroken(str(message or "stream error"), kind if kind else None))
            return
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: Json) -> None:
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or ():
            slot = self.slots.setdefault(call.get("index", len(self.slots)), _Slot())
            function = call.get("function") or {}
            slot.id = call.get("id") or slot.id
            slot.name = function.get("name") or slot.name
            if isinstance(function.get("arguments"), str):
                slot.arguments.append(function["arguments"])
        if isinstance(choice.get("finish_reason"), str):
            self.finish = choice["finish_reason"]

    def broken(self, error: StreamBroken) -> None:
        if self.error is None:
            self.error = error

    def final(self) -> Turn:
        calls = tuple(
            ToolCall.from_json(s.id, s.name, "".join(s.arguments))
            for _, s in sorted(self.slots.items())
        )
        text = "".join(self.text)
        if self.error is None and self.finish is None:
            self.error = StreamBroken("the stream ended without a finish_reason")
        if self.error is not None:
            native = self.ext.get("native_stop_reason") if isinstance(self.ext, dict) else None
            return Turn.failed(
                self.error,
                native=native if isinstance(native, str) else self.finish,
                text=text,
                tool_calls=calls,
                withheld=withheld_calls(self.ext),
            )
        end = ending(self.ext, self.finish, OPENAI_NATIVE)
        refusal = "".join(self.refusal)
        return Turn(
            text, calls, end.stop_reason, end.native, end.truncated, end.withheld, refusal=refusal
        )


class OpenAIChatCodec:
    path = "/chat/completions"

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
        return body

    def parse_body(self, body: Any) -> Turn:
        return parse_body(body)

    def stream_state(self) -> OpenAIStream:
        return OpenAIStream()


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
