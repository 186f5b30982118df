"""What `gateway audit` computes from audit records: pure functions, no I/O.

`summarize` groups records by provider, model, route or client format and counts, per group, the
requests, errors, each normalized stop reason, cut answers, withheld tool calls, argument parse
failures, missing stream terminators, the exchanges whose translation dropped request fields,
the retried exchanges, those a fallback target answered and the cut streams that were continued
(`recovered`), with time percentiles and token sums.
`truncated_list` lists the latest cut exchanges. Rendering lives in `gateway.audit.render`.

Conventions, so numbers mean the same thing everywhere:
- A missing group value (no provider, no route, empty model) is shown as `-` (`NO_PROVIDER`).
- An error is a record with `error_class` set or an HTTP status of 400 or more.
- A record without a stop reason (refused before routing, or no answer came) counts as `none`
  (`NO_STOP_REASON`, the name /metrics uses too); one outside the closed set counts as `unknown`,
  as the gateway normalizes a stop reason it does not know. So the stop reason counts of a group
  always add up to its requests.
- Percentiles use the nearest-rank method: the value at rank ceil(p/100 * n) of the sorted values.
  It always returns an observed time (no interpolation between a fast and a slow exchange), which
  is what one wants with the small samples of a single provider over a short window. A percentile
  is `None` when the group has no value (no first byte, or no end time, was ever recorded).
- Token sums add the known counts; a record without usage adds nothing.
- Cost sums add the known costs (USD); an answered record whose cost is unknown adds nothing to
  `cost_usd` and counts in `cost_unknown` instead, never as 0. `cost_usd` is None when no record
  of the group has a known cost.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal, get_args

from gateway.audit.record import (
    NO_PROVIDER,
    NO_STOP_REASON,
    OPERATIONS,
    AuditRecord,
    cost_unknown,
)
from gateway.events import StopReason
from gateway.resilience.outcome import read_attempts

GroupBy = Literal["provider", "model", "route", "client"]
GROUP_BY: Final[tuple[str, ...]] = get_args(GroupBy)

# The closed set of normalized stop reasons, in the order every report shows them.
STOP_REASONS: Final[tuple[str, ...]] = tuple(reason.value for reason in StopReason)
# The keys of `GroupSummary.stop_reasons`: the closed set, then records without a stop reason.
STOP_REASON_KEYS: Final[tuple[str, ...]] = (*STOP_REASONS, NO_STOP_REASON)
MISSING: Final = NO_PROVIDER  # one mark for every missing value, the provider's included

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION: Final = re.compile(r"(\d+)([smhdw])")


def parse_since(text: str) -> int:
    """`30m`, `24h`, `7d`, `90s`, `2w` -> seconds. Anything else raises a ValueError saying why."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"invalid duration {text!r}: expected a whole number followed by s, m, h, d or w "
            "(e.g. 90s, 30m, 24h, 7d, 2w)"
        )
    amount = int(match.group(1))
    if amount == 0:
        raise ValueError(f"invalid duration {text!r}: must be greater than zero")
    return amount * _UNITS[match.group(2)]


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One group's row of the report. Times are in milliseconds, unrounded."""

    by: str
    group: str
    requests: int
    errors: int
    stop_reasons: dict[str, int]  # every name of STOP_REASON_KEYS, in that order
    truncated: int
    truncated_rate: float  # truncated / requests, 0.0 for an empty group
    withheld_tool_calls: int
    parse_failures: int
    missing_terminators: int
    ttfb_p50_ms: float | None
    ttfb_p95_ms: float | None
    total_p50_ms: float | None
    total_p95_ms: float | None
    input_tokens: int
    output_tokens: int
    dropped_fields: int = 0  # exchanges whose request translation dropped at least one field
    retried: int = 0  # exchanges that took more than one attempt
    fallbacks: int = 0  # exchanges answered by another target than the first one tried
    cost_usd: float | None = None  # the known costs' sum; None: no known cost in the group
    cost_unknown: int = 0  # answered exchanges whose cost is not known (not in cost_usd)
    other_operations: int = 0  # token counts and embeddings: in the cost only
    recovered: int = 0  # streams cut after their first byte and continued ([recovery])


@dataclass(frozen=True, slots=True)
class TruncatedExchange:
    """One line of `gateway audit --truncated`."""

    id: str
    time: str  # started_at as ISO 8601 UTC with milliseconds, e.g. 2023-11-14T22:13:20.000Z
    provider: str | None
    model: str
    why: str | None  # the record's cut_reason
    withheld_tools: tuple[str, ...]  # names of the withheld tool calls, in call order
    ended_by: str | None = None  # "client" or "server" when one of them ended it early


def nearest_rank(p: int, n: int) -> int:
    """The 1-based rank of the `p`th percentile of `n` sorted values: ceil(p/100 * n), in
    integers (no float rounding)."""
    return (p * n + 99) // 100


def percentile(values: Sequence[float], p: int) -> float | None:
    """Nearest-rank percentile of `values` (need not be sorted); None when there are none."""
    if not 0 < p <= 100:
        raise ValueError(f"percentile must be in 1..100, not {p}")
    if not values:
        return None
    ordered = sorted(values)
    return ordered[nearest_rank(p, len(ordered)) - 1]


def group_key(record: AuditRecord, by: str) -> str:
    if by == "provider":
        value = record.provider
    elif by == "model":
        value = record.model
    elif by == "route":
        value = record.route
    elif by == "client":
        value = record.client_format
    else:
        raise ValueError(f"cannot group by {by!r}: expected one of {', '.join(GROUP_BY)}")
    return value or MISSING


def is_error(record: AuditRecord) -> bool:
    return record.error_class is not None or (
        record.http_status is not None and record.http_status >= 400
    )


def stop_reason_of(record: AuditRecord) -> str:
    reason = record.stop_reason
    if reason is None:
        return NO_STOP_REASON
    return reason if reason in STOP_REASONS else StopReason.UNKNOWN.value


def summarize(records: Iterable[AuditRecord], by: str = "provider") -> list[GroupSummary]:
    """One summary per group, most requests first, then by group name."""
    groups: dict[str, list[AuditRecord]] = {}
    for record in records:
        groups.setdefault(group_key(record, by), []).append(record)
    summaries = [_summarize_group(by, key, members) for key, members in groups.items()]
    summaries.sort(key=lambda s: (-s.requests, s.group))
    return summaries


GENERATE: Final = OPERATIONS[0]  # a model answer


def _summarize_group(by: str, key: str, everything: list[AuditRecord]) -> GroupSummary:
    """The figures of the group's model answers; its other exchanges (token counts,
    embeddings), which have no stop reason and are never cut, count in the cost only."""
    records = [r for r in everything if r.operation == GENERATE]
    stops = dict.fromkeys(STOP_REASON_KEYS, 0)
    for record in records:
        stops[stop_reason_of(record)] += 1
    requests = len(records)
    truncated = sum(1 for r in records if r.truncated)
    attempts = [read_attempts(r.attempts) for r in records]
    ttfb = [ms for r in records if (ms := r.ttfb_ms) is not None]
    total = [ms for r in records if (ms := r.total_ms) is not None]
    costs = [usd for r in everything if (usd := r.cost_usd) is not None]
    return GroupSummary(
        by=by,
        group=key,
        requests=requests,
        errors=sum(1 for r in records if is_error(r)),
        stop_reasons=stops,
        truncated=truncated,
        truncated_rate=truncated / requests if requests else 0.0,
        withheld_tool_calls=sum(len(r.withheld_tool_calls) for r in records),
        parse_failures=sum(len(r.parse_failures) for r in records),
        missing_terminators=sum(1 for r in records if r.cut_reason == "missing_terminator"),
        ttfb_p50_ms=percentile(ttfb, 50),
        ttfb_p95_ms=percentile(ttfb, 95),
        total_p50_ms=percentile(total, 50),
        total_p95_ms=percentile(total, 95),
        input_tokens=sum(r.input_tokens or 0 for r in records),
        output_tokens=sum(r.output_tokens or 0 for r in records),
        dropped_fields=sum(1 for r in records if r.dropped_fields),
        retried=sum(1 for read in attempts if read.tries > 1),
        fallbacks=sum(1 for read in attempts if read.fell_back),
        cost_usd=math.fsum(costs) if costs else None,  # fsum: no drift over many small costs
        cost_unknown=sum(1 for r in records if cost_unknown(r)),
        other_operations=len(everything) - len(records),
        recovered=sum(1 for r in records if r.recovered),
    )


def iso_utc(timestamp: float) -> str:
    """Unix seconds -> `2023-11-14T22:13:20.000Z` (always milliseconds, always `Z`)."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def truncated_list(
    records: Iterable[AuditRecord], limit: int | None = 20
) -> list[TruncatedExchange]:
    """The latest `limit` cut exchanges, newest first (ties broken by id, for a stable order)."""
    cut = [r for r in records if r.truncated]
    cut.sort(key=lambda r: r.id)
    cut.sort(key=lambda r: r.started_at, reverse=True)  # stable: equal times keep id order
    if limit is not None:
        cut = cut[: max(limit, 0)]
    return [
        TruncatedExchange(
            id=r.id,
            time=iso_utc(r.started_at),
            provider=r.provider,
            model=r.model,
            why=r.cut_reason,
            withheld_tools=tuple(str(call.get("name", "")) for call in r.withheld_tool_calls),
            ended_by=r.ended_by,
        )
        for r in cut
    ]
