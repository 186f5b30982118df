"""Tools the model may call, the hooks around them, and how one call is checked and run.

    async def get_weather(args: dict[str, Any]) -> str:
        return f"Sunny in {args['city']}"

    weather = Tool(
        "get_weather",
        "Current weather for a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        get_weather,
    )

A tool returns the text of its result, or a `ToolOutput` (text, error flag, and the typed
result of a sub-agent it ran); raising makes an error result that carries the exception's class
and message, so the model can react. Arguments are checked before a call
runs: they must be a JSON object holding the schema's `required` properties; anything finer is
the tool's own business (raise to reject).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.loop.conversation import ToolResult
from gateway.loop.turn import ToolCall

if TYPE_CHECKING:
    from gateway.loop.conversation import LoopResult

CUT_CALL_RESULT = (
    "Not run: the response carrying this tool call was cut at max tokens, so the call was not "
    "run. Call it again in a shorter response."
)
ABORTED_RESULT = "Operation aborted"
CANCELLED_RESULT = "Cancelled: the run was interrupted before this tool call finished"


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool may return instead of bare text: `is_error` marks a failure without raising;
    `subagent` is the typed result of the sub-agent the tool ran, for code (the model reads
    `content` only)."""

    content: str
    is_error: bool = False
    subagent: LoopResult | None = None


ToolFunction = Callable[[dict[str, Any]], Awaitable["str | ToolOutput"]]


@dataclass(frozen=True, slots=True)
class Tool:
    """`stops_with_run`: the tool itself ends promptly when the run is cancelled or out of time
    (a sub-agent does: it runs under the parent's cancellation and deadline), so the loop waits
    for its result instead of cancelling it, and the record keeps what the tool says happened."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # a JSON schema of an object
    run: ToolFunction
    stops_with_run: bool = False


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

    def stops_with_run(self, call: ToolCall) -> bool:
        return self._tools[call.name].stops_with_run

    async def run(self, call: ToolCall) -> ToolResult:
        """Run a call `problem` found nothing wrong with; a raising tool gives an error result."""
        assert call.parsed is not None
        try:
            content = await self._tools[call.name].run(dict(call.parsed))
        except Exception as exc:
            return error_result(call, f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}")
        if isinstance(content, ToolOutput):
            return ToolResult(
                call.id, call.name, content.content, content.is_error, content.subagent
            )
        if not isinstance(content, str):
            kind = type(content).__name__
            return error_result(call, f"Tool {call.name!r} returned {kind}, not text")
        return ToolResult(call.id, call.name, content)
