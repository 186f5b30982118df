"""One model turn, normalized: its text, its tool calls and why it stopped.

    turn = await model.complete(request)
    turn.stop_reason            # StopReason.TOOL_CALLS
    turn.native_stop_reason     # "tool_use": the server's own value, verbatim
    turn.tool_calls[0].parsed   # {"city": "Paris"}, or None with `parse_error` set

`StopReason` is the gateway's own vocabulary (`gateway.events`, which depends on nothing of the
server), so a turn read through the gateway and one read straight from a provider compare equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.events import CUT_STOP_REASONS, StopReason
from gateway.loop.model_errors import ModelError

__all__ = ["CUT_STOP_REASONS", "StopReason", "TokenCounts", "ToolCall", "Turn", "WithheldCall"]


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Tokens a model call used, as its response reported them (0 where it reported none).
    `input` includes cached input tokens."""

    input: int = 0
    output: int = 0

    def __add__(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(self.input + other.input, self.output + other.output)

    @property
    def total(self) -> int:
        return self.input + self.output


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model wrote it. `arguments` is the raw JSON text; `parsed` is the
    object it encodes, or None with `parse_error` naming why (class and offset, never the text).
    """

    id: str
    name: str
    arguments: str
    parsed: dict[str, Any] | None = None
    parse_error: str | None = None

    @classmethod
    def from_json(cls, call_id: str, name: str, arguments: str) -> ToolCall:
        if not arguments.strip():
            return cls(call_id, name, arguments, {})
        try:
            value = orjson.loads(arguments)
        except orjson.JSONDecodeError as exc:
            problem = f"{type(exc).__name__} at offset {exc.pos} of {len(arguments)}"
            return cls(call_id, name, arguments, None, problem)
        if not isinstance(value, dict):
            return cls(call_id, name, arguments, None, "the arguments are not a JSON object")
        return cls(call_id, name, arguments, value)

    @classmethod
    def from_object(cls, call_id: str, name: str, value: Any) -> ToolCall:
        """An Anthropic `tool_use.input`, already decoded by the server."""
        arguments = orjson.dumps(value).decode()
        if not isinstance(value, dict):
            return cls(call_id, name, arguments, None, "the arguments are not a JSON object")
        return cls(call_id, name, arguments, value)

    @classmethod
    def not_run(cls, call_id: str, name: str) -> ToolCall:
        """How a refused call of a cut response is shown to the model: empty arguments."""
        return cls(call_id, name, "{}", {})

    def identity(self) -> tuple[str, bytes]:
        """Name and canonical arguments (sorted keys, no whitespace): equal means identical."""
        if self.parsed is not None:
            return self.name, orjson.dumps(self.parsed, option=orjson.OPT_SORT_KEYS)
        return self.name, self.arguments.encode()


@dataclass(frozen=True, slots=True)
class WithheldCall:
    """A tool call the gateway did not deliver because its response was cut: id and name only."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Turn:
    """What one model call produced. A failed call is a turn too: ERROR, with `error` set."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: StopReason = StopReason.STOP
    native_stop_reason: str | None = None
    truncated: bool = False
    withheld_tool_calls: tuple[WithheldCall, ...] = ()
    refusal: str = ""
    error: ModelError | None = None
    raw: Any = field(default=None, repr=False, compare=False)
    tokens: TokenCounts = field(default=TokenCounts(), compare=False)

    @classmethod
    def failed(
        cls,
        error: ModelError,
        *,
        native: str | None = None,
        text: str = "",
        tool_calls: tuple[ToolCall, ...] = (),
        withheld: tuple[WithheldCall, ...] = (),
        raw: Any = None,
        tokens: TokenCounts = TokenCounts(),
    ) -> Turn:
        return cls(
            text,
            tool_calls,
            StopReason.ERROR,
            native,
            True,
            withheld,
            error=error,
            raw=raw,
            tokens=tokens,
        )

    @property
    def announced_calls(self) -> tuple[WithheldCall, ...]:
        """Every tool call this response announced: delivered ones, then withheld ones."""
        calls = [WithheldCall(c.id, c.name) for c in self.tool_calls]
        seen = {c.id for c in calls}
        return (*calls, *(w for w in self.withheld_tool_calls if w.id not in seen))
