"""An exchange's attempts in its audit record, with their circuits: each try's entry (outcome,
milliseconds, status, the wait for an upstream connection), the targets skipped for an open
circuit, and the end of the attempt that reached the client: `answered`, or `broken` when its
stream broke after the first byte.

    found = admitted(order, position, circuits, record)   # the next target that may be tried
    note(record, target, outcome, started, pool_wait)     # a try that failed
    note_answer(record, circuits, target, started, 200, broke=False)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gateway.audit.record import AuditRecord
from gateway.resilience.circuit import Circuits
from gateway.resilience.outcome import ANSWERED, BROKEN, CIRCUIT_OPEN, Outcome, attempt_entry
from gateway.settings import ResolvedTarget


def admitted(
    order: Sequence[ResolvedTarget], start: int, circuits: Circuits, record: AuditRecord
) -> tuple[int, ResolvedTarget] | None:
    """The first target from `start` on (cyclically) whose circuit admits an attempt; a target
    skipped for its open circuit is listed once in the record's attempts."""
    for step in range(len(order)):
        position = (start + step) % len(order)
        target = order[position]
        if circuits.admits(target.key):
            return position, target
        if not any(a.get("target") == target.key for a in record.attempts):
            entry = Outcome(CIRCUIT_OPEN).entry(target.provider_name, target.upstream_model, 0.0)
            record.attempts.append({**entry, "target": target.key})
    return None


def note(
    record: AuditRecord,
    target: ResolvedTarget,
    outcome: Outcome,
    started: float,
    pool_wait: float = 0.0,
) -> None:
    """The attempt's entry; `pool_wait`: seconds it waited for an upstream connection."""
    duration = time.monotonic() - started
    entry = outcome.entry(target.provider_name, target.upstream_model, duration)
    record.attempts.append(with_pool_wait(entry, pool_wait))


def note_answer(
    record: AuditRecord,
    circuits: Circuits,
    target: ResolvedTarget,
    started: float,
    status: int,
    broke: bool,
    pool_wait: float = 0.0,
    ended: float | None = None,
) -> None:
    """The attempt that reached the client, ended at `ended` (None: now): `broken` when it broke
    after its first byte (a failure of its circuit), else `answered` (a success)."""
    duration = (time.monotonic() if ended is None else ended) - started
    outcome = BROKEN if broke else ANSWERED
    entry = attempt_entry(target.provider_name, target.upstream_model, outcome, duration, status)
    record.attempts.append(with_pool_wait(entry, pool_wait))
    if broke:
        circuits.failed(target.key)
    else:
        circuits.succeeded(target.key)


def with_pool_wait(entry: dict[str, Any], pool_wait: float) -> dict[str, Any]:
    """`entry` with the milliseconds its attempt waited for an upstream connection, if any."""
    if pool_wait:
        entry["pool_wait_ms"] = round(pool_wait * 1000, 3)
    return entry
