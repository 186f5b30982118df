"""The timeouts of upstream attempts, on one watchdog timer per transport.

A wait on the upstream (`clock.waiting(now, limit, what)`) stores when it began; bytes arriving
end it (`clock.since = None`): no timer per attempt or per chunk. At each tick the watchdog asks
every clock how long its current wait has lasted (a body being read also counts the bytes it took
in since the last look as progress) and the clock cancels the waiting task once a deadline passed;
`expired` says which. Time spent outside a wait (writing to a slow client) is never counted.
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol

# How often the watchdog looks at the attempts under way: a timeout fires up to this late. One
# timer per provider ticking while there is traffic (and a second after) costs less than a timer
# armed and cancelled per attempt.
TICK: Final = 0.1
IDLE_TICKS: Final = 10


class Progress(Protocol):
    """A response body being read: how many bytes it has taken in so far."""

    received: int


class Watchdog:
    """Looks at every attempt clock of one transport each `TICK`, while there are any."""

    __slots__ = ("_clocks", "_handle", "_idle", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._clocks: set[AttemptClock] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._idle = 0  # ticks in a row without a clock

    def watch(self, clock: AttemptClock) -> None:
        self._clocks.add(clock)
        if self._handle is None:
            self._handle = self.loop.call_later(TICK, self._tick)

    def unwatch(self, clock: AttemptClock) -> None:
        self._clocks.discard(clock)

    def _tick(self) -> None:
        self._handle = None
        if self._clocks:
            self._idle = 0
            now = self.loop.time()
            for clock in tuple(self._clocks):
                clock.check(now)
        else:
            self._idle += 1
            if self._idle > IDLE_TICKS:
                return  # no traffic: the next attempt starts the ticks again
        self._handle = self.loop.call_later(TICK, self._tick)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._clocks.clear()


class AttemptClock:
    """The first-byte, idle and total deadlines of one attempt, looked at by the watchdog."""

    __slots__ = (
        "_body",
        "_deadline",
        "_limit",
        "_seen",
        "_task",
        "_watchdog",
        "expired",
        "since",
        "waited",
    )

    def __init__(self, watchdog: Watchdog, now: float, deadline: float | None) -> None:
        self._watchdog = watchdog
        self._deadline = deadline  # loop time
        self._task: asyncio.Task[object] | None = asyncio.current_task()
        self._limit: float | None = None
        self._body: Progress | None = None  # the body, once it is read
        self._seen = 0  # its bytes at the last look
        self.since: float | None = None  # when the wait under way began
        self.waited = "first_byte"  # what the wait under way is for
        self.expired: str | None = None  # "first_byte", "idle" or "total" once one fired
        watchdog.watch(self)

    def waiting(self, now: float, limit: float | None, what: str) -> None:
        self.since = now
        self._limit = limit
        self.waited = what

    def reading(self, body: Progress) -> None:
        self._body = body
        self._seen = body.received

    def check(self, now: float) -> None:
        since = self.since
        if since is None:
            return  # not waiting on the upstream
        body = self._body
        if body is not None and body.received != self._seen:
            self._seen = body.received  # bytes came in: the wait starts over
            self.since = since = now
        deadline = self._deadline
        if deadline is not None and now >= deadline:
            self.expired = "total"
        elif self._limit is not None and now >= since + self._limit:
            self.expired = self.waited
        else:
            return
        self.close()
        if self._task is not None:
            self._task.cancel()

    def fired(self) -> bool:
        """Whether the cancellation being handled is the clock's own (the task is uncancelled)."""
        if self.expired is None or self._task is None:
            return False
        return self._task.uncancel() == 0

    def close(self) -> None:
        self._watchdog.unwatch(self)
