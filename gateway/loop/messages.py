"""The loop's conversation history, independent of wire format.

A history is a sequence of `Message`: the client codecs turn it into OpenAI Chat messages or
Anthropic Messages content blocks.

    history = [
        UserMessage("Weather in Paris?"),
        AssistantMessage("", (ToolCall.from_json("call_1", "get_weather", '{"city": "Paris"}'),)),
        ToolResult("call_1", "get_weather", "Sunny, 21 °C"),
    ]
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.loop.turn import ToolCall


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The answer to one tool call. `is_error` results tell the model the call failed."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


Message = UserMessage | AssistantMessage | ToolResult
