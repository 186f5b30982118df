"""The two guards that end a loop which makes no progress: plain counters, no I/O.

stall = StallGuard(limit=3)
stall.record(stalled=True, refused_cut=False)      # None, None, then a StalledError

runaway = RunawayGuard(max_steps=256, max_identical=4)
runaway.step(call.identity(), call.name)           # None, ... then a RunawayError
"""

from __future__ import annotations

from gateway.loop.errors import RunawayError, StalledError

STALLED_MESSAGE = (
    "Execution aborted: {n} consecutive tool-only iterations made no progress "
    "(all tool calls failed)"
)
ALL_REFUSED_SUFFIX = (
    " — each of those responses was cut off at max_tokens, and its tool calls were refused"
)
IDENTICAL_MESSAGE = "repeated an identical tool call {n} times"
BUDGET_MESSAGE = "exceeded {n} steps"


class StallGuard:
    """Counts consecutive stalled iterations (at least one tool call, every result an error).

    A non-stalled iteration resets the streak. The caller never records a cancelled iteration.
    """

    __slots__ = ("_all_refused", "limit", "streak")

    def __init__(self, limit: int = 3) -> None:
        self.limit = limit
        self.streak = 0
        self._all_refused = True

    def record(self, stalled: bool, refused_cut: bool) -> StalledError | None:
        if not stalled:
            self.streak = 0
            self._all_refused = True
            return None
        self.streak += 1
        self._all_refused = self._all_refused and refused_cut
        if self.streak < self.limit:
            return None
        message = STALLED_MESSAGE.format(n=self.limit)
        if self._all_refused:
            message += ALL_REFUSED_SUFFIX
        return StalledError(message, self.streak, self._all_refused)


class RunawayGuard:
    """Counts steps (tool calls started while the turn is live) and the streak of consecutive
    byte-identical calls. A step is counted before anything about the call is checked; the step
    that trips the guard is counted and must not run.

    `max_steps` steps are allowed, the next one trips ("exceeded 256 steps"); the
    `max_identical`-th identical call in a row trips ("repeated an identical tool call 4 times").
    A call whose arguments are unknown (`identity` None: a withheld call of a cut response)
    matches no call.
    """

    __slots__ = ("_last", "max_identical", "max_steps", "steps", "streak")

    def __init__(self, max_steps: int = 256, max_identical: int = 4) -> None:
        self.max_steps = max_steps
        self.max_identical = max_identical
        self.steps = 0
        self.streak = 0
        self._last: object = object()

    def step(self, identity: tuple[str, bytes] | None, tool_name: str) -> RunawayError | None:
        self.steps += 1
        if identity is not None and identity == self._last:
            self.streak += 1
        else:
            self.streak = 1
            self._last = identity if identity is not None else object()
        if self.steps > self.max_steps:
            message = BUDGET_MESSAGE.format(n=self.max_steps)
            return RunawayError(message, "step_budget", tool_name, self.steps)
        if self.streak >= self.max_identical:
            message = IDENTICAL_MESSAGE.format(n=self.max_identical)
            return RunawayError(message, "identical_calls", tool_name, self.steps)
        return None
