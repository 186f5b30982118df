"""The run's stop conditions outside the turns themselves: the caller's cancellation signal and
the wall-clock deadline, checked between steps and raced against every wait (model call, tool,
hook), so that neither waits for a slow answer.

    watch = Watch(cancel_event, wall_clock=30.0)
    end = watch.stopped()                       # End(INTERRUPTED | TIMED_OUT) or None
    turn = await watch.run(model.complete(request))   # raises Interrupted when stopped
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.loop.errors import InterruptedLoopError, LoopError, WallClockError
from gateway.loop.result import CompletionReason

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


class Watch:
    """The cancellation signal and the deadline: checked between steps, and raced against every
    wait (model call, tool, hook) so neither waits for a slow answer."""

    def __init__(self, cancel: asyncio.Event | None, wall_clock: float | None) -> None:
        self.cancel = cancel
        self.wall_clock = wall_clock
        loop = asyncio.get_running_loop()
        self.deadline = None if wall_clock is None else loop.time() + wall_clock

    def stopped(self) -> End | None:
        if self.cancel is not None and self.cancel.is_set():
            return End(R.INTERRUPTED, InterruptedLoopError("the run was cancelled"))
        if self.deadline is not None and asyncio.get_running_loop().time() >= self.deadline:
            message = f"the run exceeded its wall-clock limit of {self.wall_clock} s"
            return End(R.TIMED_OUT, WallClockError(message))
        return None

    async def run(self, awaitable: Awaitable[T]) -> T:
        if self.cancel is None and self.deadline is None:
            return await awaitable
        task = asyncio.ensure_future(awaitable)
        waiters: set[asyncio.Future[Any]] = {task}
        stopper = asyncio.ensure_future(self.cancel.wait()) if self.cancel is not None else None
        if stopper is not None:
            waiters.add(stopper)
        timeout = None
        if self.deadline is not None:
            timeout = max(0.0, self.deadline - asyncio.get_running_loop().time())
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if stopper is not None:
                stopper.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if not task.cancelled():
            return task.result()
        raise Interrupted(self.stopped() or End(R.INTERRUPTED, InterruptedLoopError("cancelled")))
