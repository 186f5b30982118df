"""Tools the model may call, the hooks around them, and how one call is checked and run.

    async def get_weather(args: dict[str, Any]) -> str:
        return f"Sunny in {args['city']}"

    weather = Tool(
        "get_weather",
        "Current weather for a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        get_weather,
    )

A tool returns the text of its result; raising makes an error result that carries the
exception's class and message, so the model can react. Arguments are checked before a call
runs: they must be a JSON object holding the schema's `required` properties; anything finer is
the tool's own business (raise to reject).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.loop.messages import ToolResult
from gateway.loop.turn import ToolCall

CUT_CALL_RESULT = (
    "Not run: the response carrying this tool call was cut at max tokens, so the call was not "
    "run. Call it again in a shorter response."
)
ABORTED_RESULT = "Operation aborted"
CANCELLED_RESULT = "Cancelled: the run was interrupted before this tool call finished"

ToolFunction = Callable[[dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]  # a JSON schema of an object
    run: ToolFunction


@dataclass(frozen=True, slots=True)
class Hooks:
    """Optional async callbacks around each call that is run.

    `permission_check` returning False answers the call with an error result instead of running
    it; `before_tool` and `after_tool` see every call that is run. None of them sees a call that
    is not run (a cut response's, an unknown tool's, invalid arguments, the runaway's tripping
    call). An exception raised by a hook ends the run and propagates to the caller.
    """

    permission_check: Callable[[ToolCall], Awaitable[bool]] | None = None
    before_tool: Callable[[ToolCall], Awaitable[None]] | None = None
    after_tool: Callable[[ToolCall, ToolResult], Awaitable[None]] | None = None


def error_result(call: ToolCall, content: str) -> ToolResult:
    return ToolResult(call.id, call.name, content, is_error=True)


class Toolbox:
    """The tools by name; says what is wrong with a call before it runs, and runs it."""

    __slots__ = ("_tools",)

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = dict(tools)

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    def problem(self, call: ToolCall) -> str | None:
        """Why this call cannot run (an unknown tool, invalid arguments), or None."""
        tool = self._tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self._tools)) or "none"
            return f"Unknown tool {call.name!r}; the available tools are: {names}"
        if call.parsed is None:
            return f"Invalid arguments for tool {call.name!r}: {call.parse_error}"
        missing = [k for k in tool.parameters.get("required") or () if k not in call.parsed]
        if missing:
            names = ", ".join(repr(k) for k in missing)
            return f"Invalid arguments for tool {call.name!r}: missing required {names}"
        return None

    async def run(self, call: ToolCall) -> ToolResult:
        """Run a call `problem` found nothing wrong with; a raising tool gives an error result."""
        assert call.parsed is not None
        try:
            content = await self._tools[call.name].run(dict(call.parsed))
        except Exception as exc:
            return error_result(call, f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}")
        if not isinstance(content, str):
            kind = type(content).__name__
            return error_result(call, f"Tool {call.name!r} returned {kind}, not text")
        return ToolResult(call.id, call.name, content)
