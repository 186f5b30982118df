"""`gateway audit` output: a terminal table for people, JSON and CSV for scripts.

Every renderer returns text ending with a newline. The JSON and CSV shapes below are a contract:
keys and columns keep this order, new ones are only ever appended, and numbers keep their format.

Summary JSON (`render_json`): a list, one object per group, most requests first:

    {"by": "provider", "group": "openai", "requests": 4, "errors": 1,
     "stop_reasons": {"stop": 1, "tool_calls": 0, "length": 2, "stop_sequence": 0,
                      "content_filter": 0, "refusal": 0, "pause": 0, "context_window": 0,
                      "malformed": 0, "error": 1, "aborted": 0, "unknown": 0, "none": 0},
     "truncated": 2, "truncated_rate": 0.5, "withheld_tool_calls": 1, "parse_failures": 0,
     "missing_terminators": 1, "ttfb_p50_ms": 120.0, "ttfb_p95_ms": 480.0,
     "total_p50_ms": 900.0, "total_p95_ms": 2500.0, "input_tokens": 310, "output_tokens": 95,
     "dropped_fields": 1, "retried": 1, "fallbacks": 0, "cost_usd": 0.01234, "cost_unknown": 1,
     "other_operations": 0, "recovered": 0}

  `group` is `-` when the record had no value; `truncated_rate` is rounded to 4 decimals; times
  are milliseconds rounded to 1 decimal, `null` when the group has none; every stop reason of the
  closed set is present, zeros included, then `none`: the records without a stop reason (added
  after the others, so it comes last). `dropped_fields` counts the exchanges whose request
  translation dropped at least one field, `retried` those that took more than one attempt and
  `fallbacks` those answered by another target than the first one tried (added later, so they
  come last). `cost_usd` is the sum of the known costs in USD, unrounded, `null` when no
  exchange of the group has a known cost; `cost_unknown` counts the answered exchanges whose cost
  is unknown, which are never summed as 0 (both added later). `other_operations` counts the
  group's exchanges that asked for no model answer (token counts, embeddings): they are in no
  other count but the cost (added later). `recovered` counts the streams cut after their first
  byte and continued by `[recovery]` (added last). Indented by two spaces.

Summary CSV (`render_csv`): one header row, then one row per group, `\\n` line endings:

    by,group,requests,errors,stop_stop,stop_tool_calls,stop_length,stop_stop_sequence,
    stop_content_filter,stop_refusal,stop_pause,stop_context_window,stop_malformed,stop_error,
    stop_aborted,stop_unknown,truncated,truncated_rate,withheld_tool_calls,parse_failures,
    missing_terminators,ttfb_p50_ms,ttfb_p95_ms,total_p50_ms,total_p95_ms,input_tokens,
    output_tokens,stop_none,dropped_fields,retried,fallbacks,cost_usd,cost_unknown,
    other_operations,recovered

  (one line in the output; `stop_none`, the records without a stop reason, `dropped_fields`,
  `retried`, `fallbacks`, `cost_usd`, `cost_unknown`, `other_operations` and `recovered` came
  later and so were appended at the end). `truncated_rate` has exactly 4 decimals (`0.5000`),
  times exactly 1 (`120.0`), a cost exactly 8 (`0.01234000`, USD); a missing time or cost is
  an empty field.

Truncated JSON (`render_truncated_json`): a list, newest first:

    {"id": "req-7", "time": "2023-11-14T22:13:20.250Z", "provider": "openai",
     "model": "gpt-4o", "why": "length", "withheld_tools": ["get_weather"], "ended_by": null}

  `provider`, `why` and `ended_by` may be `null`; `time` is ISO 8601 UTC with milliseconds;
  `ended_by` is `client` or `server` when one of them ended the exchange early.

Truncated CSV (`render_truncated_csv`): header `id,time,provider,model,why,withheld_tools,
ended_by` (one line); withheld tool names joined by `;`; a missing value is an empty field.
The terminal table shows `ended_by` in its `why` cell: `cancelled by server`.

JSON and CSV carry every value exactly, control characters included (JSON escapes them; a CSV
field holding a line break or a carriage return is quoted). The terminal tables show values from
requests and upstreams (models, routes, tool names, ids) as plain text: never read as rich
markup, and with control characters written as visible escapes (`\\x1b`, `\\r`), so a
model name cannot move the cursor, retitle the terminal or hide what follows it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any, Final

import orjson

from gateway.audit.objects import summary_object, truncated_object
from gateway.audit.record import NO_STOP_REASON
from gateway.audit.report import (
    STOP_REASONS,
    GroupSummary,
    TruncatedExchange,
)

# The terminal tables are `gateway.audit.terminal`'s; named here too, beside the JSON and CSV.
from gateway.audit.terminal import DEFAULT_WIDTH, render_table, render_truncated_table, visible

SUMMARY_COLUMNS: Final[tuple[str, ...]] = (
    "by",
    "group",
    "requests",
    "errors",
    *(f"stop_{name}" for name in STOP_REASONS),
    "truncated",
    "truncated_rate",
    "withheld_tool_calls",
    "parse_failures",
    "missing_terminators",
    "ttfb_p50_ms",
    "ttfb_p95_ms",
    "total_p50_ms",
    "total_p95_ms",
    "input_tokens",
    "output_tokens",
    f"stop_{NO_STOP_REASON}",
    "dropped_fields",
    "retried",
    "fallbacks",
    "cost_usd",
    "cost_unknown",
    "other_operations",
    "recovered",
)
TRUNCATED_COLUMNS: Final[tuple[str, ...]] = (
    "id",
    "time",
    "provider",
    "model",
    "why",
    "withheld_tools",
    "ended_by",
)


def _json(items: list[dict[str, Any]]) -> str:
    return orjson.dumps(items, option=orjson.OPT_INDENT_2).decode() + "\n"


def _csv(header: Sequence[str], rows: list[list[str]]) -> str:
    # Written with "\r\n" so that a field holding "\r" is quoted too (with "\n" as the line
    # terminator, csv quotes only "\n" and a reader would split the row at the "\r"), then
    # each row's terminator is cut back to "\n".
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    lines = []
    for row in [header, *rows]:
        writer.writerow(row)
        lines.append(out.getvalue()[:-2] + "\n")
        out.seek(0)
        out.truncate()
    return "".join(lines)


def _csv_ms(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _csv_usd(value: float | None) -> str:
    return "" if value is None else f"{value:.8f}"


def render_json(summaries: Sequence[GroupSummary]) -> str:
    return _json([summary_object(s) for s in summaries])


def render_csv(summaries: Sequence[GroupSummary]) -> str:
    rows = [
        [
            s.by,
            s.group,
            str(s.requests),
            str(s.errors),
            *(str(s.stop_reasons.get(name, 0)) for name in STOP_REASONS),
            str(s.truncated),
            f"{s.truncated_rate:.4f}",
            str(s.withheld_tool_calls),
            str(s.parse_failures),
            str(s.missing_terminators),
            _csv_ms(s.ttfb_p50_ms),
            _csv_ms(s.ttfb_p95_ms),
            _csv_ms(s.total_p50_ms),
            _csv_ms(s.total_p95_ms),
            str(s.input_tokens),
            str(s.output_tokens),
            str(s.stop_reasons.get(NO_STOP_REASON, 0)),
            str(s.dropped_fields),
            str(s.retried),
            str(s.fallbacks),
            _csv_usd(s.cost_usd),
            str(s.cost_unknown),
            str(s.other_operations),
            str(s.recovered),
        ]
        for s in summaries
    ]
    return _csv(SUMMARY_COLUMNS, rows)


def render_truncated_json(items: Sequence[TruncatedExchange]) -> str:
    return _json([truncated_object(t) for t in items])


def render_truncated_csv(items: Sequence[TruncatedExchange]) -> str:
    rows = [
        [
            t.id,
            t.time,
            t.provider or "",
            t.model,
            t.why or "",
            ";".join(t.withheld_tools),
            t.ended_by or "",
        ]
        for t in items
    ]
    return _csv(TRUNCATED_COLUMNS, rows)


__all__ = [
    "DEFAULT_WIDTH",
    "SUMMARY_COLUMNS",
    "TRUNCATED_COLUMNS",
    "render_csv",
    "render_json",
    "render_table",
    "render_truncated_csv",
    "render_truncated_json",
    "render_truncated_table",
    "visible",
]
