"""Whether a failed attempt gets another, and after how long: tenacity's full-jitter backoff and
stop conditions, applied only once an attempt failed (an exchange that succeeds first time
builds nothing here).

    retries = policy.begin(started=time.monotonic())   # per exchange
    delay = retries.after_failure(outcome, revisit=True) # None: give up, else sleep then retry
"""

from __future__ import annotations

import email.utils
import math
import time
from dataclasses import dataclass, field

import tenacity
from tenacity import stop_after_attempt, stop_before_delay, wait_random_exponential

from gateway.resilience.outcome import Outcome
from gateway.settings import RetrySettings


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A `retry-after` header's wait in seconds: delta-seconds or an HTTP date; None when absent
    or unreadable (then only the backoff applies)."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


class RetryPolicy:
    """One retry table, built once: the wait and stop strategies every exchange shares."""

    def __init__(self, settings: RetrySettings) -> None:
        self.settings = settings
        self.retry_on = frozenset(settings.on_status)
        self._wait = wait_random_exponential(multiplier=settings.backoff, max=settings.max_backoff)
        self._stop = stop_after_attempt(settings.attempts) | stop_before_delay(settings.deadline)

    def begin(self, started: float) -> Retries:
        """`started`: the exchange's start on the `time.monotonic` clock (tenacity's)."""
        return Retries(self, started)


@dataclass(slots=True)
class Retries:
    """One exchange's count of attempts against its policy."""

    policy: RetryPolicy
    started: float
    attempts: int = 1  # the one under way
    _state: tenacity.RetryCallState | None = field(default=None, repr=False)

    def after_failure(self, outcome: Outcome, *, revisit: bool) -> float | None:
        """The wait before the next attempt, or None when there is none. `revisit`: the next
        target was tried already in this exchange, so it gets the backoff (and the upstream's
        `retry-after`, capped); a target not yet tried is tried at once."""
        if not outcome.retryable:
            return None
        policy = self.policy
        state = self._state
        if state is None:
            state = self._state = tenacity.RetryCallState(None, None, (), {})  # type: ignore[arg-type]
            state.start_time = self.started
        state.attempt_number = self.attempts
        state.outcome_timestamp = time.monotonic()
        delay = 0.0
        if revisit:
            delay = policy._wait(state)
            asked = retry_after_seconds(outcome.retry_after)
            if asked is not None:
                if asked > policy.settings.max_retry_after:
                    return None
                delay = max(delay, asked)
        state.upcoming_sleep = delay
        if policy._stop(state):
            return None
        self.attempts += 1
        return delay
