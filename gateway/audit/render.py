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
     "other_operations": 0}

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
  other count but the cost (added last). Indented by two spaces.

Summary CSV (`render_csv`): one header row, then one row per group, `\\n` line endings:

    by,group,requests,errors,stop_stop,stop_tool_calls,stop_length,stop_stop_sequence,
    stop_content_filter,stop_refusal,stop_pause,stop_context_window,stop_malformed,stop_error,
    stop_aborted,stop_unknown,truncated,truncated_rate,withheld_tool_calls,parse_failures,
    missing_terminators,ttfb_p50_ms,ttfb_p95_ms,total_p50_ms,total_p95_ms,input_tokens,
    output_tokens,stop_none,dropped_fields,retried,fallbacks,cost_usd,cost_unknown,
    other_operations

  (one line in the output; `stop_none`, the records without a stop reason, `dropped_fields`,
  `retried`, `fallbacks`, `cost_usd`, `cost_unknown` and `other_operations` came later and so
  were appended at the end). `truncated_rate` has exactly 4 decimals (`0.5000`), times exactly
  1 (`120.0`), a cost exactly 8 (`0.01234000`, USD); a missing time or cost is an empty field.

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
import re
from collections.abc import Sequence
from typing import Any, Final

import orjson
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from gateway.audit.record import NO_PROVIDER, NO_STOP_REASON
from gateway.audit.report import (
    MISSING,
    STOP_REASON_KEYS,
    STOP_REASONS,
    GroupSummary,
    TruncatedExchange,
)

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
DEFAULT_WIDTH: Final = 100

# Stop-reason headers on two lines, so a table with several reasons still fits 80 columns.
_STOP_HEADERS: Final = {
    "stop": "stop",
    "tool_calls": "tool\ncalls",
    "length": "length",
    "stop_sequence": "stop\nsequence",
    "content_filter": "content\nfilter",
    "refusal": "refusal",
    "pause": "pause",
    "context_window": "context\nwindow",
    "malformed": "malformed",
    "error": "error",
    "aborted": "aborted",
    "unknown": "unknown",
    NO_STOP_REASON: NO_STOP_REASON,
}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _summary_object(s: GroupSummary) -> dict[str, Any]:
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
    }


def _truncated_object(t: TruncatedExchange) -> dict[str, Any]:
    return {
        "id": t.id,
        "time": t.time,
        "provider": t.provider,
        "model": t.model,
        "why": t.why,
        "withheld_tools": list(t.withheld_tools),
        "ended_by": t.ended_by,
    }


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
    return _json([_summary_object(s) for s in summaries])


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
        ]
        for s in summaries
    ]
    return _csv(SUMMARY_COLUMNS, rows)


def render_truncated_json(items: Sequence[TruncatedExchange]) -> str:
    return _json([_truncated_object(t) for t in items])


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


# --- terminal tables ---------------------------------------------------------------------------

# C0 and C1 controls, DEL, line and paragraph separators, and the bidirectional marks,
# embeddings, overrides and isolates (which reorder what a terminal shows after them).
_CONTROLS: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED_CONTROLS: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_control(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED_CONTROLS.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(value: str) -> str:
    """`value` with every control character written as an escape: `\\x1b`, `\\r`, `\\u202e`."""
    return _CONTROLS.sub(_escape_control, value)


def _plain(value: str) -> Text:
    """A table cell showing `value` as it is: escaped controls, no markup, no emoji codes."""
    return Text(visible(value))


def _count(n: int) -> str:
    """Token counts compactly: 950, 12.3k, 4.5M."""
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def _pair_ms(p50: float | None, p95: float | None) -> str:
    if p50 is None or p95 is None:
        return MISSING
    return f"{p50:.0f}/{p95:.0f}"


def _table(title: str) -> Table:
    return Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,  # two spaces between columns, not three
        header_style="bold",
        title_justify="left",
    )


def _console(width: int) -> Console:
    return Console(
        record=True,
        width=width,
        file=io.StringIO(),  # the caller prints; the console only lays out
        color_system=None,
        force_terminal=False,
        highlight=False,
        legacy_windows=False,
    )


def _natural_width(table: Table) -> int:
    console = _console(10_000)
    return Measurement.get(console, console.options, table).maximum


def _to_text(*tables: Table, width: int) -> str:
    console = _console(width)
    for index, table in enumerate(tables):
        if index:
            console.print()
        console.print(table)
    lines = console.export_text(styles=False).splitlines()
    return "".join(line.rstrip() + "\n" for line in lines)


_COUNT_HEADERS: Final = (
    "requests",
    "errors",
    "truncated",
    "withheld\ntools",
    "arg parse\nfailures",
    "missing\nterminators",
)
_TIME_HEADERS: Final = ("ttfb ms\np50/p95", "total ms\np50/p95", "tokens\nin/out")


_DROPPED_HEADER: Final = "field\ndrops"  # short: the table must fit 80 columns
_RETRIED_HEADER: Final = "retried/\nfallback"


def _count_cells(s: GroupSummary, dropped: bool) -> list[str]:
    cells = [
        str(s.requests),
        str(s.errors),
        f"{s.truncated} ({s.truncated_rate * 100:.1f}%)",
        str(s.withheld_tool_calls),
        str(s.parse_failures),
        str(s.missing_terminators),
    ]
    return [*cells, str(s.dropped_fields)] if dropped else cells


def _time_cells(s: GroupSummary, retried: bool = False) -> list[str]:
    cells = [
        _pair_ms(s.ttfb_p50_ms, s.ttfb_p95_ms),
        _pair_ms(s.total_p50_ms, s.total_p95_ms),
        f"{_count(s.input_tokens)}/{_count(s.output_tokens)}",
    ]
    return [*cells, f"{s.retried}/{s.fallbacks}"] if retried else cells


def _group_table(
    title: str, by: str, headers: Sequence[str], rows: Sequence[tuple[str, list[str]]]
) -> Table:
    table = _table(title)
    table.add_column(by, overflow="fold")
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for group, cells in rows:
        table.add_row(_plain(group), *cells)
    return table


def render_table(
    summaries: Sequence[GroupSummary], by: str, console_width: int = DEFAULT_WIDTH
) -> str:
    """The summary for a terminal, laid out to fit `console_width` (80 columns and up).

    Counts, times and tokens share one table when it fits the width, else they are split in two;
    stop reasons get their own table, with only the reasons some group has. Truncated shows as
    `n (x.x%)`, times as `p50/p95` in ms, tokens compactly (`12.3k/4.5k`). The exchanges whose
    translation dropped request fields get a column when there are any, and so do the retried
    exchanges with those a fallback answered (`retried/fallback`). When some exchange has a
    known cost, a last table shows, per group, the known costs' sum and how many answered
    exchanges have an unknown cost (never counted as $0).
    """
    if not summaries:
        return "no audit records in this window\n"
    requests = sum(s.requests for s in summaries)
    title = f"{requests} requests by {by}"
    dropped = any(s.dropped_fields for s in summaries)
    retried = any(s.retried or s.fallbacks for s in summaries)
    count_headers = (*_COUNT_HEADERS, _DROPPED_HEADER) if dropped else _COUNT_HEADERS
    time_headers = (*_TIME_HEADERS, _RETRIED_HEADER) if retried else _TIME_HEADERS
    combined = _group_table(
        title,
        by,
        count_headers + time_headers,
        [(s.group, _count_cells(s, dropped) + _time_cells(s, retried)) for s in summaries],
    )
    if _natural_width(combined) <= console_width:
        tables = [combined]
    else:
        tables = [
            _group_table(
                title,
                by,
                count_headers,
                [(s.group, _count_cells(s, dropped)) for s in summaries],
            ),
            _group_table(
                f"times and tokens by {by}",
                by,
                time_headers,
                [(s.group, _time_cells(s, retried)) for s in summaries],
            ),
        ]
    shown = [name for name in STOP_REASON_KEYS if any(s.stop_reasons.get(name) for s in summaries)]
    tables.append(
        _group_table(
            f"stop reasons by {by}",
            by,
            [_STOP_HEADERS[name] for name in shown],
            [(s.group, [str(s.stop_reasons.get(name, 0)) for name in shown]) for s in summaries],
        )
    )
    if any(s.cost_usd is not None for s in summaries):
        tables.append(
            _group_table(
                f"cost by {by}",
                by,
                _COST_HEADERS,
                [(s.group, [_usd(s.cost_usd), str(s.cost_unknown)]) for s in summaries],
            )
        )
    return _to_text(*tables, width=console_width)


_COST_HEADERS: Final = ("cost\nUSD", "cost not\nknown")


def _usd(value: float | None) -> str:
    """A cost for people: `$12.35`, `$0.0123`, `$0.000041`; `-` when none is known."""
    if value is None:
        return MISSING
    if value >= 1:
        return f"${value:,.2f}"
    if value >= 0.01:
        return f"${value:.4f}"
    return f"${value:.6f}"


def _why(t: TruncatedExchange) -> str:
    """The cut reason, and who ended the exchange when someone did: `cancelled by server`."""
    why = t.why or MISSING
    return f"{why} by {t.ended_by}" if t.ended_by else why


def render_truncated_table(
    items: Sequence[TruncatedExchange], console_width: int = DEFAULT_WIDTH
) -> str:
    """The latest cut exchanges for a terminal, newest first."""
    if not items:
        return "no truncated exchanges in this window\n"
    table = _table(f"latest {len(items)} truncated exchanges")
    table.add_column("time (UTC)", no_wrap=True)
    # The cells a reader scans stay whole; the id is cut short (JSON and CSV carry it whole).
    table.add_column("id", overflow="ellipsis", no_wrap=True, max_width=14)
    table.add_column("provider", no_wrap=True)
    table.add_column("model", no_wrap=True)
    table.add_column("why", no_wrap=True)
    table.add_column("withheld tools", overflow="fold")
    for t in items:
        table.add_row(
            t.time.replace("T", " ")[:19],  # to the second; JSON and CSV keep milliseconds
            _plain(t.id),
            _plain(t.provider or NO_PROVIDER),
            _plain(t.model or MISSING),
            _plain(_why(t)),
            _plain(", ".join(t.withheld_tools) or MISSING),
        )
    return _to_text(table, width=console_width)
