"""The agent loop: ask the model, run its tool calls, repeat until a turn ends the run.

    loop = AgentLoop(model, [weather], limits=Limits(max_turns=10))
    result = await loop.run("What's the weather in Paris?")

How each model turn ends the iteration (`_OUTCOMES`, one row per stop reason):

    STOP, TOOL_CALLS, UNKNOWN  run the tool calls and continue; without calls, COMPLETED
    LENGTH                     cut: refuse the calls and continue (policy `refuse`), or end
                               TRUNCATED (`end`); without calls, a cut final answer: the marker
                               is appended, TRUNCATED, no error
    CONTEXT_WINDOW             cut, always ends TRUNCATED: continuing only grows the context
    REFUSAL, CONTENT_FILTER    REFUSED
    ERROR, ABORTED, MALFORMED  ERROR (a failed call, a broken stream, an unusable response)
    STOP_SEQUENCE              COMPLETED: the answer ended at a stop sequence the caller set
    PAUSE                      continue: the paused turn's text is sent back so the model resumes

Only the first row runs tool calls. A refused call is shown to the model as a call with empty
arguments (its own arguments are not trusted) answered by an error result, so the history is
valid on both wires and the same under the gateway's `withhold` and `pass` policies.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable, Sequence

from gateway.loop.conversation import (
    AssistantMessage,
    CompletionReason,
    Iteration,
    LoopResult,
    Message,
    ToolResult,
    UserMessage,
)
from gateway.loop.errors import (
    CallInterrupted,
    MaxTurnsError,
    RefusedError,
    RunawayError,
    TruncatedError,
    TurnError,
)
from gateway.loop.guards import RunawayGuard, StallGuard
from gateway.loop.limits import CutPolicy, Limits
from gateway.loop.model import ModelClient, ModelRequest
from gateway.loop.tools import (
    ABORTED_RESULT,
    CANCELLED_RESULT,
    CUT_CALL_RESULT,
    Hooks,
    Tool,
    Toolbox,
    error_result,
)
from gateway.loop.turn import StopReason, ToolCall, Turn, WithheldCall
from gateway.loop.watch import CURRENT, End, Interrupted, Watch

R = CompletionReason
TRUNCATION_MARKER = "[System: response truncated at max_tokens]"


class _Kind(enum.Enum):
    RUN = "run"
    CUT = "cut"
    CONTINUE = "continue"
    FINAL = "final"
    REFUSED = "refused"
    FAILED = "failed"


_OUTCOMES: dict[StopReason, _Kind] = {
    StopReason.STOP: _Kind.RUN,
    StopReason.TOOL_CALLS: _Kind.RUN,
    StopReason.UNKNOWN: _Kind.RUN,
    StopReason.LENGTH: _Kind.CUT,
    StopReason.CONTEXT_WINDOW: _Kind.CUT,
    StopReason.REFUSAL: _Kind.REFUSED,
    StopReason.CONTENT_FILTER: _Kind.REFUSED,
    StopReason.ERROR: _Kind.FAILED,
    StopReason.ABORTED: _Kind.FAILED,
    StopReason.MALFORMED: _Kind.FAILED,
    StopReason.STOP_SEQUENCE: _Kind.FINAL,
    StopReason.PAUSE: _Kind.CONTINUE,
}


_Step = End | Iteration  # the run ends, or the iteration goes on to the checkpoint


def _marked(text: str) -> str:
    return f"{text}\n\n{TRUNCATION_MARKER}" if text else TRUNCATION_MARKER


class _Attempt:
    """One conversation: its history, its guards and its turn count."""

    def __init__(
        self,
        loop: AgentLoop,
        watch: Watch,
        number: int,
        start: Sequence[Message],
        record: list[Iteration],
    ) -> None:
        self.loop = loop
        self.watch = watch
        self.number = number
        self.messages: list[Message] = list(start)
        self.record = record
        self.stall = StallGuard(loop.limits.max_stalled_iterations)
        self.runaway = RunawayGuard(loop.limits.max_steps, loop.limits.max_identical_calls)
        self.turns = 0

    async def run(self) -> End:
        while True:
            end = self.watch.stopped()
            if end is not None:
                return end
            request = ModelRequest(tuple(self.messages), self.loop.toolbox.tools, self.loop.system)
            try:
                turn = await self.watch.run(self.loop.model.complete(request))
            except Interrupted as stop:
                failed = Turn.failed(CallInterrupted("the run stopped while the model answered"))
                self.record.append(Iteration(self.number, failed))
                return stop.end
            self.turns += 1
            outcome = await _HANDLERS[_OUTCOMES[turn.stop_reason]](self, turn)
            if isinstance(outcome, End):
                return outcome
            end = self._checkpoint(outcome)
            if end is not None:
                return end

    def _checkpoint(self, iteration: Iteration) -> End | None:
        """The turn's own ending continues the loop; only now, in this order: the cancellation
        signal and the wall clock (so a cancelled iteration is never counted as stalled), the
        stalled-iteration guard, then max_turns."""
        end = self.watch.stopped()
        if end is not None:
            return end
        stalled = self.stall.record(iteration.stalled, iteration.refused_cut)
        if stalled is not None:
            return End(R.ERROR, stalled)
        return self._turn_limit()

    def _turn_limit(self) -> End | None:
        limit = self.loop.limits.max_turns
        if limit is None or self.turns < limit:
            return None
        message = f"the task needs more than max_turns = {limit} model turns"
        return End(R.MAX_TURNS, MaxTurnsError(message, limit))

    # --- one handler per turn outcome ---------------------------------------------------------

    async def _run(self, turn: Turn) -> _Step:
        if not turn.tool_calls:
            return self._finish(turn, R.COMPLETED)
        results, end = await self._run_calls(turn.tool_calls)
        return self._settle(turn, turn.tool_calls, results, end, refused_cut=False)

    async def _cut(self, turn: Turn) -> _Step:
        announced = turn.announced_calls
        marker = turn.stop_reason is StopReason.LENGTH
        if not announced:
            return self._finish(turn, R.TRUNCATED, marker=marker)
        if marker and self.loop.cut_policy is CutPolicy.REFUSE:
            results, end = self._refuse(turn, announced)
            shown = tuple(ToolCall.not_run(call.id, call.name) for call in announced)
            return self._settle(turn, shown, results, end, refused_cut=True)
        self.record.append(Iteration(self.number, turn))
        message = (
            f"the response was cut ({turn.stop_reason.value}) and its {len(announced)} "
            "tool call(s) were not run"
        )
        text = _marked(turn.text) if marker else turn.text
        return End(R.TRUNCATED, TruncatedError(message, turn, announced), text)

    async def _continue(self, turn: Turn) -> _Step:
        iteration = Iteration(self.number, turn)
        self.record.append(iteration)
        if turn.text:
            self.messages.append(AssistantMessage(turn.text))
        return iteration

    async def _final(self, turn: Turn) -> _Step:
        return self._finish(turn, R.COMPLETED)

    async def _refused(self, turn: Turn) -> _Step:
        self.record.append(Iteration(self.number, turn))
        message = f"the model refused ({turn.stop_reason.value}: {turn.native_stop_reason})"
        return End(R.REFUSED, RefusedError(message, turn))

    async def _failed(self, turn: Turn) -> _Step:
        self.record.append(Iteration(self.number, turn))
        if turn.error is not None:
            message = f"the model turn failed ({turn.error.type}): {turn.error.message}"
        else:
            message = (
                f"the model turn ended in {turn.stop_reason.value} ({turn.native_stop_reason})"
            )
        return End(R.ERROR, TurnError(message, turn))

    # --- tool calls ---------------------------------------------------------------------------

    def _finish(self, turn: Turn, reason: CompletionReason, *, marker: bool = False) -> End:
        self.record.append(Iteration(self.number, turn))
        if turn.text:
            self.messages.append(AssistantMessage(turn.text))
        return End(reason, None, _marked(turn.text) if marker else None)

    def _refuse(
        self, turn: Turn, announced: tuple[WithheldCall, ...]
    ) -> tuple[list[ToolResult], End | None]:
        """Every call of a cut response is a step, and one whose arguments arrived counts toward
        the identical-call streak like any other (a withheld call's arguments are unknown)."""
        written = {call.id: call for call in turn.tool_calls}
        results: list[ToolResult] = []
        for call in announced:
            seen = written.get(call.id)
            tripped = self.runaway.step(seen.identity() if seen else None, call.name)
            results.append(ToolResult(call.id, call.name, CUT_CALL_RESULT, is_error=True))
            if tripped is not None:
                return results, End(R.RUNAWAY, tripped)
        return results, None

    async def _run_calls(self, calls: tuple[ToolCall, ...]) -> tuple[list[ToolResult], End | None]:
        results: list[ToolResult] = []
        toolbox = self.loop.toolbox
        for call in calls:
            end = self.watch.stopped()
            if end is not None:
                return results, end
            tripped = self.runaway.step(call.identity(), call.name)
            problem = toolbox.problem(call)
            if tripped is not None:
                results.append(error_result(call, problem or ABORTED_RESULT))
                return results, End(R.RUNAWAY, tripped)
            if problem is not None:
                results.append(error_result(call, problem))
                continue
            try:
                results.append(await self._run_one(call))
            except Interrupted as stop:
                results.append(error_result(call, CANCELLED_RESULT))
                return results, stop.end
        return results, None

    async def _run_one(self, call: ToolCall) -> ToolResult:
        hooks = self.loop.hooks
        check = hooks.permission_check
        if check is not None and not await self.watch.run(check(call)):
            return error_result(call, f"Permission denied: the call to {call.name!r} was refused")
        if hooks.before_tool is not None:
            await self.watch.run(hooks.before_tool(call))
        toolbox = self.loop.toolbox
        if toolbox.stops_with_run(call):
            result = await toolbox.run(call)  # it ends itself under this run's watch
        else:
            result = await self.watch.run(toolbox.run(call))
        if hooks.after_tool is not None:
            # A run stopping now keeps the call's own result; the next check ends the run.
            with contextlib.suppress(Interrupted):
                await self.watch.run(hooks.after_tool(call, result))
        return result

    def _settle(
        self,
        turn: Turn,
        shown: tuple[ToolCall, ...],
        results: list[ToolResult],
        end: End | None,
        *,
        refused_cut: bool,
    ) -> _Step:
        """Record the iteration; every call gets a result, so `messages` stays a valid history."""
        interrupted = end is not None and end.reason is not R.RUNAWAY
        filler = CANCELLED_RESULT if interrupted else ABORTED_RESULT
        answered = {result.call_id for result in results}
        results += [error_result(c, filler) for c in shown if c.id not in answered]
        stalled = bool(results) and all(result.failed for result in results)
        self.messages.append(AssistantMessage(turn.text, shown))
        self.messages.extend(results)
        iteration = Iteration(self.number, turn, tuple(results), refused_cut, stalled)
        self.record.append(iteration)
        return iteration if end is None else end


_HANDLERS: dict[_Kind, Callable[[_Attempt, Turn], Awaitable[_Step]]] = {
    _Kind.RUN: _Attempt._run,
    _Kind.CUT: _Attempt._cut,
    _Kind.CONTINUE: _Attempt._continue,
    _Kind.FINAL: _Attempt._final,
    _Kind.REFUSED: _Attempt._refused,
    _Kind.FAILED: _Attempt._failed,
}


class AgentLoop:
    """A model, its tools, hooks, limits and the cut-response policy; `run` is one task.

        loop = AgentLoop(model, [weather], hooks=Hooks(permission_check=ask_user))
        result = await loop.run("Weather in Paris?", cancel=stop_event)
        if result.reason is CompletionReason.RUNAWAY: ...

    A runaway in a fresh conversation (no `history`) is retried once from the identical prompt;
    a continued conversation is not retried. Cancelling the task running `run` raises
    CancelledError as usual; setting `cancel` ends the run with INTERRUPTED and a result. A run
    started inside a tool of another run (a sub-agent) also stops when that run is cancelled or
    out of time.
    """

    def __init__(
        self,
        model: ModelClient,
        tools: Sequence[Tool] = (),
        *,
        system: str | None = None,
        hooks: Hooks | None = None,
        limits: Limits | None = None,
        cut_policy: CutPolicy = CutPolicy.REFUSE,
    ) -> None:
        names = [tool.name for tool in tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique: {', '.join(duplicates)}")
        self.model = model
        self.toolbox = Toolbox({tool.name: tool for tool in tools})
        self.system = system
        self.hooks = hooks or Hooks()
        self.limits = limits or Limits()
        self.cut_policy = CutPolicy(cut_policy)

    async def run(
        self,
        prompt: str,
        *,
        history: Sequence[Message] = (),
        cancel: asyncio.Event | None = None,
    ) -> LoopResult:
        watch = Watch(cancel, self.limits.wall_clock, parent=CURRENT.get())
        token = CURRENT.set(watch)
        try:
            return await self._run(watch, prompt, history)
        finally:
            CURRENT.reset(token)

    async def _run(self, watch: Watch, prompt: str, history: Sequence[Message]) -> LoopResult:
        start = (*history, UserMessage(prompt))
        record: list[Iteration] = []
        attempt = _Attempt(self, watch, 1, start, record)
        end = await attempt.run()
        retried_after = None
        if end.reason is R.RUNAWAY and not history:
            assert isinstance(end.error, RunawayError)
            retried_after = end.error
            attempt = _Attempt(self, watch, 2, start, record)  # the identical prompt, afresh
            end = await attempt.run()
            if isinstance(end.error, RunawayError):
                end.error.retried = True
        text = end.text
        if text is None:
            text = record[-1].turn.text if record else ""
        return LoopResult(
            end.reason, text, end.error, tuple(record), tuple(attempt.messages), retried_after
        )


async def run_loop(
    model: ModelClient,
    prompt: str,
    tools: Sequence[Tool] = (),
    *,
    history: Sequence[Message] = (),
    system: str | None = None,
    hooks: Hooks | None = None,
    limits: Limits | None = None,
    cut_policy: CutPolicy = CutPolicy.REFUSE,
    cancel: asyncio.Event | None = None,
) -> LoopResult:
    """`AgentLoop(...).run(...)` in one call."""
    loop = AgentLoop(model, tools, system=system, hooks=hooks, limits=limits, cut_policy=cut_policy)
    return await loop.run(prompt, history=history, cancel=cancel)
