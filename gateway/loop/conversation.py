"""The loop's conversation and what a run returns, in one module because they nest: a
`ToolResult` carries the `LoopResult` of the sub-agent its call ran, and a `LoopResult` carries
the conversation's messages.

A history is a sequence of `Message`, independent of wire format: the client codecs turn it into
OpenAI Chat messages or Anthropic Messages content blocks.

    history = [
        UserMessage("Weather in Paris?"),
        AssistantMessage("", (ToolCall.from_json("call_1", "get_weather", '{"city": "Paris"}'),)),
        ToolResult("call_1", "get_weather", "Sunny, 21 °C"),
    ]

A run returns a completion reason to switch on, the answer, and the record:

    result = await loop.run("Weather in Paris?")
    match result.reason:
        case CompletionReason.COMPLETED | CompletionReason.TRUNCATED:
            print(result.text)
        case CompletionReason.RUNAWAY:
            print("fault:", result.error)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gateway.loop.errors import LoopError, RunawayError
from gateway.loop.turn import TokenCounts, ToolCall, Turn


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


class CompletionReason(enum.StrEnum):
    COMPLETED = "completed"  # a final answer
    TRUNCATED = "truncated"  # a final answer cut short (marked), or a cut turn under `end`
    ERROR = "error"  # a model turn failed, or the loop stalled
    MAX_TURNS = "max_turns"
    INTERRUPTED = "interrupted"  # the cancellation signal was set
    TIMED_OUT = "timed_out"  # the wall-clock limit passed
    REFUSED = "refused"  # refusal or content filter
    RUNAWAY = "runaway"  # the runaway guard tripped (after the one fresh retry, if any)


SUCCESSFUL = frozenset({CompletionReason.COMPLETED, CompletionReason.TRUNCATED})


@dataclass(frozen=True, slots=True)
class Iteration:
    """One model turn and the results that answered its tool calls.

    `attempt` is 1, or 2 in the fresh conversation a runaway is retried in. `refused_cut`: the
    turn was cut and its calls were answered with refusals; `stalled`: it had tool calls and every
    result was an error.
    """

    attempt: int
    turn: Turn
    results: tuple[ToolResult, ...] = ()
    refused_cut: bool = False
    stalled: bool = False

    @property
    def subagents(self) -> tuple[LoopResult, ...]:
        """The results of the sub-agents this iteration's tool calls ran, in call order."""
        return tuple(r.subagent for r in self.results if r.subagent is not None)


@dataclass(frozen=True, slots=True)
class LoopResult:
    """`text` is the last turn's text (the final answer when the run succeeded). `messages` is the
    conversation of the last attempt, ready to continue with `run(..., history=messages)`.
    `retried_after` is the runaway that made the loop start afresh once."""

    reason: CompletionReason
    text: str
    error: LoopError | None
    iterations: tuple[Iteration, ...]
    messages: tuple[Message, ...]
    retried_after: RunawayError | None = None

    @property
    def ok(self) -> bool:
        return self.reason in SUCCESSFUL

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(iteration.turn for iteration in self.iterations)

    @property
    def tokens(self) -> TokenCounts:
        """What every model turn of the run used, the retried conversation included."""
        total = TokenCounts()
        for iteration in self.iterations:
            total += iteration.turn.tokens
        return total
