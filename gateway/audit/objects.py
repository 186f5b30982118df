"""The JSON objects of the audit report: a group's summary and a cut exchange, as `gateway audit
--format json` prints them and the dashboard's API answers them (one shape for both). Kept apart
from `gateway.audit.render`, which loads the terminal tables (rich) the server never needs."""

from __future__ import annotations

from typing import Any

from gateway.audit.report import STOP_REASON_KEYS, GroupSummary, TruncatedExchange


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def summary_object(s: GroupSummary) -> dict[str, Any]:
    return {
        "by": s.by,
        "group": s.group,
        "requests": s.requests,
        "errors": s.errors,
        "stop_reasons": {name: s.stop_reasons.get(name, 0) for name in STOP_REASON_KEYS},
        "truncated": s.truncated,
        "truncated_rate": round(s.truncated_rate, 4),
        "withheld_tool_calls": s.withheld_tool_calls,
        "parse_failures": s.parse_failures,
        "missing_terminators": s.missing_terminators,
        "ttfb_p50_ms": _ms(s.ttfb_p50_ms),
        "ttfb_p95_ms": _ms(s.ttfb_p95_ms),
        "total_p50_ms": _ms(s.total_p50_ms),
        "total_p95_ms": _ms(s.total_p95_ms),
        "input_tokens": s.input_tokens,
        "output_tokens": s.output_tokens,
        "dropped_fields": s.dropped_fields,
        "retried": s.retried,
        "fallbacks": s.fallbacks,
        "cost_usd": s.cost_usd,
        "cost_unknown": s.cost_unknown,
        "other_operations": s.other_operations,
        "recovered": s.recovered,
    }


def truncated_object(t: TruncatedExchange) -> dict[str, Any]:
    return {
        "id": t.id,
        "time": t.time,
        "provider": t.provider,
        "model": t.model,
        "why": t.why,
        "withheld_tools": list(t.withheld_tools),
        "ended_by": t.ended_by,
    }
