"""The dashboard's aggregates as SQL, for each dialect the audit stores speak.

Every figure is computed by the database, so a dashboard over millions of records reads a few
dozen rows: one query per panel, each a GROUP BY over the filtered window. What a figure means
is `gateway.audit.report`'s definition, word for word (an error, a cut, a retry, a fallback, a
nearest-rank percentile, the stop reason `none` and `unknown`); a test checks that these queries
give what `gateway audit --format json` gives on the same store, on SQLite and PostgreSQL.

Where the dialects differ (placeholders, JSON arrays, integer buckets) a `Dialect` row holds the
difference; the queries themselves are written once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from gateway.audit.migrations import TABLE
from gateway.audit.record import NO_PROVIDER, NO_STOP_REASON, OPERATIONS
from gateway.audit.report import STOP_REASONS
from gateway.events import StopReason
from gateway.resilience.outcome import ANSWERS, CIRCUIT_OPEN

GENERATE: Final = OPERATIONS[0]


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    placeholder: Callable[[int], str]  # the n-th bound value (1-based)
    json_length: Callable[[str], str]  # elements of a JSON array column
    # (alias of the elements' value, FROM-clause item) for the elements of a JSON array column
    json_elements: Callable[[str], tuple[str, str]]
    # the elements in array order, as (alias of the value, FROM item, column giving the order)
    ordered_elements: Callable[[str], tuple[str, str, str]]
    json_text: Callable[[str, str], str]  # a JSON object's member as text (NULL when missing)
    first_text: Callable[[str, str], str]  # the first array element's member as text
    distinct: str  # null-safe "differs from"
    bucket: Callable[[str, str], str]  # whole buckets of `step` seconds since the epoch
    byte_order: str  # ORDER BY suffix comparing text byte by byte (as Python compares str)


DIALECTS: Final[dict[str, Dialect]] = {
    "sqlite": Dialect(
        name="sqlite",
        placeholder=lambda n: "?",
        json_length=lambda col: f"json_array_length({col})",
        json_elements=lambda col: ("e.value", f"json_each({col}) AS e"),
        ordered_elements=lambda col: ("e.value", f"json_each({col}) AS e", "e.key"),
        json_text=lambda value, key: f"json_extract({value}, '$.{key}')",
        first_text=lambda col, key: f"json_extract({col}, '$[0].{key}')",
        distinct="IS NOT",
        bucket=lambda col, step: f"(CAST(({col}) / {step} AS INTEGER) * {step})",
        byte_order="",  # SQLite's BINARY collation is byte order
    ),
    "postgresql": Dialect(
        name="postgresql",
        placeholder=lambda n: f"${n}",
        json_length=lambda col: f"jsonb_array_length({col})",
        json_elements=lambda col: ("e.v", f"jsonb_array_elements({col}) AS e(v)"),
        ordered_elements=lambda col: (
            "e.v",
            f"jsonb_array_elements({col}) WITH ORDINALITY AS e(v, n)",
            "e.n",
        ),
        json_text=lambda value, key: f"({value} ->> '{key}')",
        first_text=lambda col, key: f"({col} -> 0 ->> '{key}')",
        distinct="IS DISTINCT FROM",
        bucket=lambda col, step: f"(CAST(floor(({col}) / {step}) AS BIGINT) * {step})",
        byte_order=' COLLATE "C"',
    ),
}

# What `gateway audit --by` groups by, as columns: a missing value is shown as "-".
GROUP_COLUMNS: Final = {
    "provider": "provider",
    "model": "model",
    "route": "route",
    "client": "client_format",
}


def _quoted(values: tuple[str, ...] | frozenset[str]) -> str:
    return ", ".join(f"'{v}'" for v in sorted(values))


@dataclass(slots=True)
class Filters:
    """The window and the filters every panel shares, bound as parameters (never spliced)."""

    dialect: Dialect
    since: float | None = None
    until: float | None = None
    provider: str | None = None  # "-" selects the records without a provider
    model: str | None = None
    params: list[object] = field(default_factory=list)

    def bind(self, value: object) -> str:
        self.params.append(value)
        return self.dialect.placeholder(len(self.params))

    def where(self, *more: str) -> str:
        clauses = [*more]
        if self.since is not None:
            clauses.append(f"started_at >= {self.bind(float(self.since))}")
        if self.until is not None:
            clauses.append(f"started_at < {self.bind(float(self.until))}")
        if self.provider is not None:
            if self.provider == NO_PROVIDER:
                clauses.append("(provider IS NULL OR provider = '')")
            else:
                clauses.append(f"provider = {self.bind(self.provider)}")
        if self.model is not None:
            clauses.append(f"model = {self.bind(self.model)}")
        return f" WHERE {' AND '.join(clauses)}" if clauses else ""


def group_expr(by: str) -> str:
    column = GROUP_COLUMNS.get(by)
    if column is None:
        raise ValueError(f"cannot group by {by!r}: expected one of {', '.join(GROUP_COLUMNS)}")
    return f"COALESCE(NULLIF({column}, ''), '{NO_PROVIDER}')"


STOP_KEY: Final = (
    f"CASE WHEN stop_reason IS NULL THEN '{NO_STOP_REASON}' "
    f"WHEN stop_reason IN ({_quoted(STOP_REASONS)}) THEN stop_reason "
    f"ELSE '{StopReason.UNKNOWN.value}' END"
)
IS_GENERATE: Final = f"(operation = '{GENERATE}')"
IS_ERROR: Final = "(error_class IS NOT NULL OR http_status >= 400)"
IS_TRUNCATED: Final = "(CASE WHEN truncated THEN 1 ELSE 0 END)"
IS_RECOVERED: Final = "(CASE WHEN recovered IS NOT NULL THEN 1 ELSE 0 END)"  # NULL: not continued


def retried(d: Dialect) -> str:
    """1 when more than one attempt went upstream (`read_attempts(...).tries > 1`; an attempt
    skipped for an open circuit is not one), else 0. Most records hold one attempt: the JSON is
    only walked when there are more."""
    value, elements = d.json_elements("attempts")
    return (
        f"(CASE WHEN {d.json_length('attempts')} > 1 AND (SELECT COUNT(*) FROM {elements} "
        f"WHERE {d.json_text(value, 'outcome')} {d.distinct} '{CIRCUIT_OPEN}') > 1 "
        "THEN 1 ELSE 0 END)"
    )


def fell_back(d: Dialect) -> str:
    """1 when the last attempt that went upstream answered and went to another target
    (provider, upstream model) than the first attempt (`read_attempts(...).fell_back`)."""
    value, elements, order = d.ordered_elements("attempts")
    last = (
        f"SELECT {value} AS v FROM {elements} "
        f"WHERE {d.json_text(value, 'outcome')} {d.distinct} '{CIRCUIT_OPEN}' "
        f"ORDER BY {order} DESC LIMIT 1"
    )
    moved = " OR ".join(
        f"{d.json_text('last_tried.v', key)} {d.distinct} {d.first_text('attempts', key)}"
        for key in ("provider", "upstream_model")
    )
    return (
        f"(CASE WHEN {d.json_length('attempts')} > 1 AND EXISTS (SELECT 1 FROM ({last}) AS "
        f"last_tried WHERE {d.json_text('last_tried.v', 'outcome')} IN ({_quoted(ANSWERS)}) "
        f"AND ({moved})) THEN 1 ELSE 0 END)"
    )


# The stop reasons a summary counts one by one; `unknown` is what is left of the answers (a
# reason outside the closed set is counted as unknown, as the gateway normalizes it).
COUNTED_STOPS: Final = (
    *(r for r in STOP_REASONS if r != StopReason.UNKNOWN.value),
    NO_STOP_REASON,
)

# The integer columns of `summary_sql` after the group, by `GroupSummary` field name.
SUMMARY_FIELDS: Final = (
    "requests",
    "errors",
    "truncated",
    "withheld_tool_calls",
    "parse_failures",
    "missing_terminators",
    "input_tokens",
    "output_tokens",
    "dropped_fields",
    "retried",
    "fallbacks",
    "cost_unknown",
    "other_operations",
    "recovered",
)


def summary_sql(by: tuple[str, ...], f: Filters) -> str:
    """One row per group of the `by` columns: the group's values, the integers of
    `SUMMARY_FIELDS`, the cost, then the answers per stop reason of `COUNTED_STOPS` (the
    percentiles come from `percentile_sql`)."""
    d = f.dialect
    gen = f"CASE WHEN {IS_GENERATE} THEN"
    groups = ", ".join(f"{group_expr(column)} AS g{i}" for i, column in enumerate(by))
    stops = ", ".join(
        f"SUM({gen} CASE WHEN stop_reason IS NULL THEN 1 ELSE 0 END ELSE 0 END)"
        if reason == NO_STOP_REASON
        else f"SUM({gen} CASE WHEN stop_reason = '{reason}' THEN 1 ELSE 0 END ELSE 0 END)"
        for reason in COUNTED_STOPS
    )
    return (
        f"SELECT {groups}, "
        f"SUM({gen} 1 ELSE 0 END), "
        f"SUM({gen} CASE WHEN {IS_ERROR} THEN 1 ELSE 0 END ELSE 0 END), "
        f"SUM({gen} {IS_TRUNCATED} ELSE 0 END), "
        f"SUM({gen} {d.json_length('withheld_tool_calls')} ELSE 0 END), "
        f"SUM({gen} {d.json_length('parse_failures')} ELSE 0 END), "
        f"SUM({gen} CASE WHEN cut_reason = 'missing_terminator' THEN 1 ELSE 0 END ELSE 0 END), "
        f"SUM({gen} COALESCE(input_tokens, 0) ELSE 0 END), "
        f"SUM({gen} COALESCE(output_tokens, 0) ELSE 0 END), "
        f"SUM({gen} CASE WHEN dropped_fields IS NOT NULL AND "
        f"{d.json_length('dropped_fields')} > 0 THEN 1 ELSE 0 END ELSE 0 END), "
        f"SUM({gen} {retried(d)} ELSE 0 END), "
        f"SUM({gen} {fell_back(d)} ELSE 0 END), "
        f"SUM({gen} CASE WHEN cost_usd IS NULL AND stop_reason IS NOT NULL THEN 1 ELSE 0 END "
        "ELSE 0 END), "
        f"SUM(CASE WHEN {IS_GENERATE} THEN 0 ELSE 1 END), "
        f"SUM({gen} {IS_RECOVERED} ELSE 0 END), "
        "SUM(cost_usd), "
        f"{stops} "
        f"FROM {TABLE}{f.where()} GROUP BY {', '.join(f'g{i}' for i in range(len(by)))}"
    )


# The times `gateway audit` takes percentiles of, in milliseconds (AuditRecord.ttfb_ms, total_ms).
TIMES: Final = {
    "ttfb": ("first_byte_at", "(first_byte_at - started_at) * 1000"),
    "total": ("ended_at", "(ended_at - started_at) * 1000"),
}


def percentile_sql(by: str, time: str, percents: tuple[int, ...], f: Filters) -> str:
    """(group, rank, count, value) at the nearest rank of each percent (`gateway.audit.report.
    nearest_rank`, written in SQL): an observed value, as `report.percentile` takes it."""
    column, value = TIMES[time]
    ranks = " OR ".join(f"rn = ({p} * n + 99) / 100" for p in percents)
    return (
        "SELECT g, rn, n, v FROM (SELECT g, v, "
        "ROW_NUMBER() OVER (PARTITION BY g ORDER BY v) AS rn, "
        "COUNT(*) OVER (PARTITION BY g) AS n FROM "
        f"(SELECT {group_expr(by)} AS g, {value} AS v FROM {TABLE}"
        f"{f.where(IS_GENERATE, f'{column} IS NOT NULL')}) AS timed) AS ranked WHERE {ranks}"
    )


def series_sql(step: int, f: Filters) -> str:
    """Per time bucket, provider and stop reason: answers, cut answers, retried ones, those a
    fallback answered, the cut streams continued, and their cost (every operation's)."""
    d = f.dialect
    return (
        f"SELECT {d.bucket('started_at', str(step))} AS t, {group_expr('provider')} AS g, "
        f"CASE WHEN {IS_GENERATE} THEN {STOP_KEY} ELSE NULL END AS s, "
        f"SUM(CASE WHEN {IS_GENERATE} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {IS_GENERATE} THEN {IS_TRUNCATED} ELSE 0 END), "
        f"SUM(CASE WHEN {IS_GENERATE} THEN {retried(d)} ELSE 0 END), "
        f"SUM(CASE WHEN {IS_GENERATE} THEN {fell_back(d)} ELSE 0 END), "
        f"SUM(CASE WHEN {IS_GENERATE} THEN {IS_RECOVERED} ELSE 0 END), "
        "SUM(cost_usd) "
        f"FROM {TABLE}{f.where()} GROUP BY t, g, s"
    )


def cut_reason_sql(f: Filters) -> str:
    return (
        f"SELECT COALESCE(cut_reason, '{NO_PROVIDER}') AS r, COUNT(*) FROM {TABLE}"
        f"{f.where(IS_GENERATE, 'truncated')} GROUP BY r"
    )


def withheld_tools_sql(f: Filters, limit: int) -> str:
    """Withheld tool calls per tool name, most first (at most `limit` names)."""
    d = f.dialect
    value, elements = d.json_elements("withheld_tool_calls")
    where = f.where(IS_GENERATE, f"{d.json_length('withheld_tool_calls')} > 0")
    return (
        f"SELECT name, calls FROM (SELECT COALESCE({d.json_text(value, 'name')}, '') AS name, "
        f"COUNT(*) AS calls FROM {TABLE} CROSS JOIN {elements}{where} GROUP BY name) AS tools "
        f"ORDER BY calls DESC, name{d.byte_order} LIMIT {int(limit)}"
    )


def latest_cut_sql(f: Filters, limit: int) -> str:
    """The latest `limit` cut exchanges, newest first, as `gateway audit --truncated` lists
    them: its store picks the latest by time, then id, both descending; equal times are then
    listed in id order (byte by byte)."""
    order = f"id{f.dialect.byte_order}"
    return (
        "SELECT id, started_at, provider, model, cut_reason, withheld_tool_calls, ended_by FROM "
        "(SELECT id, started_at, provider, model, cut_reason, withheld_tool_calls, ended_by "
        f"FROM {TABLE}{f.where('truncated')} "
        f"ORDER BY started_at DESC, {order} DESC LIMIT {f.bind(int(limit))}) AS latest "
        f"ORDER BY started_at DESC, {order}"
    )


def choices_sql(column: str, f: Filters) -> str:
    """The distinct values of `column` in the window (the filters' drop-downs, sorted by the
    caller with the groups they may come from)."""
    return f"SELECT DISTINCT {group_expr(column)} FROM {TABLE}{f.where()}"
