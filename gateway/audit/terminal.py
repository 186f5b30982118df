"""`gateway audit`'s terminal tables (rich), for people: the summary by group, the cost by
group, and the latest cut exchanges. Values that come from requests and upstreams (models,
routes, tool names, ids) are shown as plain text, never read as rich markup, with control
characters as visible escapes (`gateway.audit.render` says why).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Final

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from gateway.audit.record import NO_PROVIDER, NO_STOP_REASON
from gateway.audit.report import MISSING, STOP_REASON_KEYS, GroupSummary, TruncatedExchange

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
_RECOVERED_HEADER: Final = "recov-\nered"
_RETRIED_HEADER: Final = "retried/\nfallback"


def _count_cells(s: GroupSummary, dropped: bool, recovered: bool = False) -> list[str]:
    cells = [
        str(s.requests),
        str(s.errors),
        f"{s.truncated} ({s.truncated_rate * 100:.1f}%)",
        str(s.withheld_tool_calls),
        str(s.parse_failures),
        str(s.missing_terminators),
    ]
    if dropped:
        cells.append(str(s.dropped_fields))
    if recovered:
        cells.append(str(s.recovered))
    return cells


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
    exchanges with those a fallback answered (`retried/fallback`), and the cut streams that were
    continued (`recovered`). When some exchange has a
    known cost, a last table shows, per group, the known costs' sum and how many answered
    exchanges have an unknown cost (never counted as $0).
    """
    if not summaries:
        return "no audit records in this window\n"
    requests = sum(s.requests for s in summaries)
    title = f"{requests} requests by {by}"
    dropped = any(s.dropped_fields for s in summaries)
    retried = any(s.retried or s.fallbacks for s in summaries)
    recovered = any(s.recovered for s in summaries)
    count_headers = (
        *_COUNT_HEADERS,
        *((_DROPPED_HEADER,) if dropped else ()),
        *((_RECOVERED_HEADER,) if recovered else ()),
    )
    time_headers = (*_TIME_HEADERS, _RETRIED_HEADER) if retried else _TIME_HEADERS
    combined = _group_table(
        title,
        by,
        count_headers + time_headers,
        [
            (s.group, _count_cells(s, dropped, recovered) + _time_cells(s, retried))
            for s in summaries
        ],
    )
    if _natural_width(combined) <= console_width:
        tables = [combined]
    else:
        tables = [
            _group_table(
                title,
                by,
                count_headers,
                [(s.group, _count_cells(s, dropped, recovered)) for s in summaries],
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
