"""The run's stop conditions outside the turns themselves: the caller's cancellation signal and
the wall-clock deadline, checked between steps and raced against every wait (model call, tool,
hook), so that neither waits for a slow answer.

    watch = Watch(cancel_event, wall_clock=30.0, parent=CURRENT.get())
    end = watch.stopped()                       # End(INTERRUPTED | TIMED_OUT) or None
    turn = await watch.run(model.complete(request))   # raises Interrupted when stopped
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from gateway.loop.conversation import CompletionReason
from gateway.loop.errors import InterruptedLoopError, LoopError, WallClockError

T = TypeVar("T")
R = CompletionReason


@dataclass(slots=True)
class End:
    """How one attempt ended; `text` overrides the last turn's text (the marked cut answer)."""

    reason: CompletionReason
    error: LoopError | None = None
    text: str | None = None


class Interrupted(Exception):
    def __init__(self, end: End) -> None:
        super().__init__(end.reason)
        self.end = end


# The watch of the loop run this code runs under: a loop started inside a tool (a sub-agent)
# inherits its parent's cancellation and deadline from it.
CURRENT: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("loop_watch", default=None)


class Watch:
    """The cancellation signal and the deadline: checked between steps, and raced against every
    wait (model call, tool, hook) so neither waits for a slow answer. A watch with a `parent`
    also stops when the parent does (its signal, its deadline), with the parent's reason."""

    def __init__(
        self, cancel: asyncio.Event | None, wall_clock: float | None, parent: Watch | None = None
    ) -> None:
        self.cancel = cancel
        self.wall_clock = wall_clock
        self.parent = parent
        loop = asyncio.get_running_loop()
        self.deadline = None if wall_clock is None else loop.time() + wall_clock
        inherited = parent.events if parent is not None else ()
        self.events: tuple[asyncio.Event, ...] = (
            (cancel, *inherited) if cancel is not None else inherited
        )
        inherited_deadline = parent.earliest if parent is not None else None
        deadlines = [d for d in (self.deadline, inherited_deadline) if d is not None]
        self.earliest: float | None = min(deadlines) if deadlines else None

    def stopped(self) -> End | None:
        if self.cancel is not None and self.cancel.is_set():
            return End(R.INTERRUPTED, InterruptedLoopError("the run was cancelled"))
        if self.deadline is not None and asyncio.get_running_loop().time() >= self.deadline:
            message = f"the run exceeded its wall-clock limit of {self.wall_clock} s"
            return End(R.TIMED_OUT, WallClockError(message))
        return self.parent.stopped() if self.parent is not None else None

    async def run(self, awaitable: Awaitable[T]) -> T:
        if not self.events and self.earliest is None:
            return await awaitable
        task = asyncio.ensure_future(awaitable)
        stoppers = [asyncio.ensure_future(event.wait()) for event in self.events]
        timeout = None
        if self.earliest is not None:
            timeout = max(0.0, self.earliest - asyncio.get_running_loop().time())
        try:
            await asyncio.wait(
                {task, *stoppers}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for stopper in stoppers:
                stopper.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if not task.cancelled():
            return task.result()
        raise Interrupted(self.stopped() or End(R.INTERRUPTED, InterruptedLoopError("cancelled")))
