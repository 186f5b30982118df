"""The loop's typed errors: why a run failed, and why a model call gave no usable turn.

Callers switch on the class (or on `type`, a stable string) and never parse prose::

    LoopError                 type           the run ended without doing its job
    ├── TurnError             "turn"         a model turn failed (ERROR, ABORTED, MALFORMED)
    ├── TruncatedError        "truncated"    a cut response whose tool calls were not run
    ├── RefusedError          "refused"      the model refused (REFUSAL, CONTENT_FILTER)
    ├── StalledError          "stalled"      consecutive iterations whose tool calls all failed
    ├── RunawayError          "runaway"      a step budget or identical-call limit tripped
    ├── MaxTurnsError         "max_turns"    the loop needed more model turns than allowed
    ├── WallClockError        "wall_clock"   the run's deadline passed
    └── InterruptedLoopError  "interrupted"  the caller's cancellation signal was set

    ModelError                type           carried on a failed `Turn` (`turn.error`)
    ├── HTTPStatusError       "http_status"  the server answered 4xx/5xx (status, error type)
    ├── ConnectionFailed      "connection"   refused, reset, DNS: no answer at all
    ├── ModelTimeout          "timeout"      no answer in time
    ├── ProtocolError         "protocol"     the answer is not the wire format it should be
    ├── StreamBroken          "stream"       an in-stream error event, or no terminator
    └── CallInterrupted       "interrupted"  the loop abandoned the call (cancel, deadline)

    match result.error:
        case RunawayError(kind="identical_calls"): ...
        case TurnError(cause=HTTPStatusError(status=429)): ...
"""

from __future__ import annotations

from typing import ClassVar, Literal

from gateway.loop.model_errors import (
    CallInterrupted,
    ConnectionFailed,
    HTTPStatusError,
    ModelError,
    ModelTimeout,
    ProtocolError,
    StreamBroken,
)
from gateway.loop.turn import StopReason, Turn, WithheldCall

__all__ = [
    "CallInterrupted",
    "ConnectionFailed",
    "HTTPStatusError",
    "InterruptedLoopError",
    "LoopError",
    "MaxTurnsError",
    "ModelError",
    "ModelTimeout",
    "ProtocolError",
    "RefusedError",
    "RunawayError",
    "StalledError",
    "StreamBroken",
    "TruncatedError",
    "TurnError",
    "WallClockError",
]


class LoopError(Exception):
    """Why a loop run failed; `LoopResult.error`."""

    type: ClassVar[str] = "loop"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TurnError(LoopError):
    """A model turn failed; `cause` is its `ModelError` when the call itself failed."""

    type = "turn"
    __match_args__ = ("cause",)

    def __init__(self, message: str, turn: Turn) -> None:
        super().__init__(message)
        self.turn = turn
        self.cause: ModelError | None = turn.error


class TruncatedError(LoopError):
    """The loop ended on a cut response whose tool calls were not run."""

    type = "truncated"
    __match_args__ = ("stop_reason",)

    def __init__(self, message: str, turn: Turn, not_run: tuple[WithheldCall, ...]) -> None:
        super().__init__(message)
        self.turn = turn
        self.stop_reason: StopReason = turn.stop_reason
        self.not_run = not_run


class RefusedError(LoopError):
    type = "refused"
    __match_args__ = ("stop_reason",)

    def __init__(self, message: str, turn: Turn) -> None:
        super().__init__(message)
        self.turn = turn
        self.stop_reason: StopReason = turn.stop_reason


class StalledError(LoopError):
    """`all_refused`: every iteration of the streak was a cut response whose calls were refused."""

    type = "stalled"
    __match_args__ = ("iterations", "all_refused")

    def __init__(self, message: str, iterations: int, all_refused: bool) -> None:
        super().__init__(message)
        self.iterations = iterations
        self.all_refused = all_refused


RunawayKind = Literal["identical_calls", "step_budget"]


class RunawayError(LoopError):
    """A runaway turn. `retried`: this is the fault reported after the one fresh retry."""

    type = "runaway"
    __match_args__ = ("kind", "retried")

    def __init__(
        self, message: str, kind: RunawayKind, tool_name: str, steps: int, retried: bool = False
    ) -> None:
        super().__init__(message)
        self.kind: RunawayKind = kind
        self.tool_name = tool_name
        self.steps = steps
        self.retried = retried


class MaxTurnsError(LoopError):
    type = "max_turns"
    __match_args__ = ("max_turns",)

    def __init__(self, message: str, max_turns: int) -> None:
        super().__init__(message)
        self.max_turns = max_turns


class WallClockError(LoopError):
    type = "wall_clock"


class InterruptedLoopError(LoopError):
    type = "interrupted"
