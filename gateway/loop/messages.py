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
from typing import TYPE_CHECKING

from gateway.loop.turn import ToolCall

if TYPE_CHECKING:
    from gateway.loop.result import LoopResult


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The answer to one tool call. `is_error` results tell the model the call failed.
    `subagent` is the typed result of the sub-agent the call ran (never sent to the model; its
    report says SUCCESS or FAILURE itself, so it is not an error result)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    subagent: LoopResult | None = None

    @property
    def failed(self) -> bool:
        """An error result, or the report of a sub-agent that failed: a failed call for the
        stalled-iteration guard either way."""
        return self.is_error or (self.subagent is not None and not self.subagent.ok)


Message = UserMessage | AssistantMessage | ToolResult
