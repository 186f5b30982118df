"""What one attempt came to, in the words the audit record and the metrics use.

outcome = failed_outcome(exc, retry_on)   # for an exception the attempt raised
outcome.retryable, outcome.target_failed  # try again? count against the target's circuit?
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Final

from gateway.errors import (
    GatewayError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeout,
    UpstreamUnreachable,
)

# Outcome names, as `AuditRecord.attempts[].outcome` and `gateway_attempts{outcome}` say them.
ANSWERED: Final = "answered"  # a 2xx reply, read to its end (a cut answer is still an answer)
ERROR_STATUS: Final = "error_status"  # the upstream answered 4xx/5xx (`status` says which)
UNREACHABLE: Final = "unreachable"  # connect failed, or the connection closed early
TIMEOUT: Final = "timeout"  # `timeout` says which one
PROTOCOL_ERROR: Final = "protocol_error"  # the answer is not the wire's
BROKEN: Final = "broken"  # answered, then the stream broke after its first byte reached the client
CIRCUIT_OPEN: Final = "circuit_open"  # skipped: the target's circuit is open
ANSWERS: Final = frozenset({ANSWERED, BROKEN})  # the attempt that reached the client
REFUSED: Final = "refused"  # the gateway refused the request for this target (e.g. its tools)
CLIENT_LEFT: Final = "client_left"  # the client left (or the server stopped) mid-attempt


@dataclass(frozen=True, slots=True)
class Outcome:
    name: str
    retryable: bool = False  # may another attempt follow (before the first byte)?
    target_failed: bool = False  # does it count against the target's circuit?
    status: int | None = None
    timeout: str | None = None
    retry_after: str | None = None

    def entry(self, provider: str, upstream_model: str, duration_s: float) -> dict[str, Any]:
        """The attempt as the audit record lists it (no message, no header value but status)."""
        entry = attempt_entry(provider, upstream_model, self.name, duration_s, self.status)
        if self.timeout is not None:
            entry["timeout"] = self.timeout
        return entry


def attempt_entry(
    provider: str, upstream_model: str, outcome: str, duration_s: float, status: int | None
) -> dict[str, Any]:
    """One line of `AuditRecord.attempts` (an answered attempt builds it without an Outcome)."""
    entry: dict[str, Any] = {
        "provider": provider,
        "upstream_model": upstream_model,
        "outcome": outcome,
        "duration_ms": round(duration_s * 1000, 3),
    }
    if status is not None:
        entry["status"] = status
    return entry


@dataclass(frozen=True, slots=True)
class AttemptsRead:
    """What a record's `attempts` say, as /metrics and `gateway audit` both count it."""

    tries: int  # attempts that went upstream (a target skipped for its open circuit is not one)
    answered: bool  # the last of them reached the client
    fell_back: bool  # ... and went to another target than the first one (not a retry at it)


def read_attempts(attempts: list[dict[str, Any]]) -> AttemptsRead:
    tried = [a for a in attempts if a.get("outcome") != CIRCUIT_OPEN]
    if not tried:
        return AttemptsRead(0, False, False)
    first, last = attempts[0], tried[-1]
    answered = last.get("outcome") in ANSWERS
    moved = (first.get("provider"), first.get("upstream_model")) != (
        last.get("provider"),
        last.get("upstream_model"),
    )
    return AttemptsRead(len(tried), answered, answered and moved)


def failed_outcome(exc: GatewayError, retry_on: Container[int]) -> Outcome:
    """Connect errors, timeouts and the statuses of `retry_on` may be retried; failures that say
    the target is unwell (no connection, no answer in time, 5xx, an unreadable answer) count
    against its circuit; 4xx say the request is wrong, or the target busy (429), and do not."""
    if isinstance(exc, UpstreamTimeout):
        return Outcome(TIMEOUT, True, True, timeout=exc.which)
    if isinstance(exc, UpstreamUnreachable):
        return Outcome(UNREACHABLE, True, True)
    if isinstance(exc, UpstreamStatusError):
        return Outcome(
            ERROR_STATUS,
            exc.status in retry_on,
            exc.status >= 500,
            status=exc.status,
            retry_after=exc.retry_after,
        )
    if isinstance(exc, UpstreamProtocolError):
        return Outcome(PROTOCOL_ERROR, False, True)
    return Outcome(REFUSED)
