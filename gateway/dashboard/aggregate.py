"""The dashboard's figures, read from an audit store's SQL aggregates (`gateway.dashboard.sql`).

    summaries = await summarize(store, "provider", window)   # == gateway audit's groups
    overview = await overview(store, window)                 # every panel of the page

Python only assembles the few rows the database returns (a row per group, bucket or tool name);
it never sees a record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from gateway.audit.objects import summary_object, truncated_object
from gateway.audit.report import (
    STOP_REASON_KEYS,
    GroupSummary,
    TruncatedExchange,
    iso_utc,
    nearest_rank,
)
from gateway.audit.store import AuditStore
from gateway.dashboard import sql
from gateway.dashboard.sql import DIALECTS, Filters
from gateway.events import StopReason

PERCENTS: Final = (50, 95)
TOOL_NAMES: Final = 20  # tool names in the withheld-calls panel
LATEST_CUT: Final = 20  # rows of the latest cut exchanges


@dataclass(frozen=True, slots=True)
class Window:
    """What the page looks at: [since, until) in unix seconds (None: open) and the filters."""

    since: float | None = None
    until: float | None = None
    provider: str | None = None
    model: str | None = None

    def filters(self, store: AuditStore) -> Filters:
        dialect = DIALECTS.get(store.dialect)
        if dialect is None:
            raise ValueError(f"the dashboard cannot query a {store.dialect!r} store")
        return Filters(dialect, self.since, self.until, self.provider, self.model)


async def _read(
    store: AuditStore, window: Window, build: Callable[[Filters], str]
) -> list[tuple[Any, ...]]:
    """One query, built against fresh filters (they collect its bound parameters), run."""
    filters = window.filters(store)
    text = build(filters)
    return await store.read(text, filters.params)


@dataclass(slots=True)
class Figures:
    """A group's additive figures, as `summary_sql` returns them: the integers of
    `sql.SUMMARY_FIELDS`, the known costs' sum, the answers per stop reason."""

    counts: dict[str, int]
    cost: float | None
    stops: dict[str, int]

    def add(self, other: Figures) -> None:
        for name, value in other.counts.items():
            self.counts[name] += value
        if other.cost is not None:
            self.cost = other.cost if self.cost is None else self.cost + other.cost
        for name, value in other.stops.items():
            self.stops[name] += value


async def _figures(
    store: AuditStore, by: tuple[str, ...], window: Window
) -> dict[tuple[str, ...], Figures]:
    rows = await _read(store, window, lambda f: sql.summary_sql(by, f))
    found = {}
    width, counted = len(by), len(sql.SUMMARY_FIELDS)
    for row in rows:
        values = row[width:]
        counts = {name: int(v or 0) for name, v in zip(sql.SUMMARY_FIELDS, values, strict=False)}
        answers = (int(v or 0) for v in values[1 + counted :])
        stops = dict(zip(sql.COUNTED_STOPS, answers, strict=True))
        stops[StopReason.UNKNOWN.value] = counts["requests"] - sum(stops.values())
        cost = values[counted]
        found[tuple(row[:width])] = Figures(counts, None if cost is None else float(cost), stops)
    return found


def _folded(figures: dict[tuple[str, ...], Figures], at: int) -> dict[str, Figures]:
    """The figures of a finer grouping summed up to the groups of its `at`-th column."""
    folded: dict[str, Figures] = {}
    for key, own in figures.items():
        into = folded.get(key[at])
        if into is None:
            folded[key[at]] = Figures(dict(own.counts), own.cost, dict(own.stops))
        else:
            into.add(own)
    return folded


async def _summaries(
    store: AuditStore, by: str, window: Window, figures: dict[str, Figures]
) -> list[GroupSummary]:
    times = {time: await _percentiles(store, by, time, window) for time in sorted(sql.TIMES)}
    summaries = []
    for group, own in figures.items():
        requests = own.counts["requests"]
        ttfb = times["ttfb"].get(group, {})
        total = times["total"].get(group, {})
        summaries.append(
            GroupSummary(
                by=by,
                group=group,
                stop_reasons={key: own.stops[key] for key in STOP_REASON_KEYS},
                truncated_rate=own.counts["truncated"] / requests if requests else 0.0,
                ttfb_p50_ms=ttfb.get(50),
                ttfb_p95_ms=ttfb.get(95),
                total_p50_ms=total.get(50),
                total_p95_ms=total.get(95),
                cost_usd=own.cost,
                **own.counts,
            )
        )
    summaries.sort(key=lambda s: (-s.requests, s.group))
    return summaries


async def summarize(store: AuditStore, by: str, window: Window) -> list[GroupSummary]:
    """`gateway.audit.report.summarize` over the window's records, computed by the database."""
    figures = await _figures(store, (by,), window)
    return await _summaries(store, by, window, {key[0]: own for key, own in figures.items()})


async def _percentiles(
    store: AuditStore, by: str, time: str, window: Window
) -> dict[str, dict[int, float]]:
    """group -> percent -> the value at its nearest rank."""
    found: dict[str, dict[int, float]] = {}
    rows = await _read(store, window, lambda f: sql.percentile_sql(by, time, PERCENTS, f))
    for group, rank, count, value in rows:
        for p in PERCENTS:
            if rank == nearest_rank(p, count):
                found.setdefault(group, {})[p] = float(value)
    return found


async def latest_cut(store: AuditStore, window: Window, limit: int) -> list[TruncatedExchange]:
    """`gateway.audit.report.truncated_list`, newest first: ids, why, withheld tool names."""
    rows = await _read(store, window, lambda f: sql.latest_cut_sql(f, limit))
    return [
        TruncatedExchange(
            id=row[0],
            time=iso_utc(float(row[1])),
            provider=row[2],
            model=row[3],
            why=row[4],
            withheld_tools=tuple(str(call.get("name", "")) for call in _json_list(row[5])),
            ended_by=row[6],
        )
        for row in rows
    ]


def _json_list(value: Any) -> list[dict[str, Any]]:
    items = orjson.loads(value) if isinstance(value, str | bytes) else value
    return [item for item in items or [] if isinstance(item, dict)]


def bucket_seconds(since: float | None, until: float) -> int:
    """A round step giving at most ~60 points over the window (a minute at least)."""
    span = until - (since if since is not None else until - 86400)
    for step in (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400):
        if span / step <= 60:
            return step
    return 30 * 86400


async def series(store: AuditStore, window: Window, step: int) -> list[dict[str, Any]]:
    """One point per bucket that holds records, oldest first: answers and cut answers (in all
    and per provider), the stop-reason mix, retries, fallbacks, recovered streams and cost."""
    points: dict[int, dict[str, Any]] = {}
    for t, provider, stop, answers, cut, retried, fallbacks, recovered, cost in await _read(
        store, window, lambda f: sql.series_sql(step, f)
    ):
        start = int(t)
        point = points.get(start)
        if point is None:
            point = points[start] = {
                "t": start,
                "requests": 0,
                "truncated": 0,
                "retried": 0,
                "fallbacks": 0,
                "recovered": 0,
                "cost_usd": None,
                "stop_reasons": dict.fromkeys(STOP_REASON_KEYS, 0),
                "providers": {},
            }
        answers, cut = int(answers or 0), int(cut or 0)
        point["requests"] += answers
        point["truncated"] += cut
        point["retried"] += int(retried or 0)
        point["fallbacks"] += int(fallbacks or 0)
        point["recovered"] += int(recovered or 0)
        if cost is not None:
            point["cost_usd"] = (point["cost_usd"] or 0.0) + float(cost)
        if stop is not None:
            point["stop_reasons"][stop] += answers
        own = point["providers"].setdefault(provider, {"requests": 0, "truncated": 0})
        own["requests"] += answers
        own["truncated"] += cut
    return [points[t] for t in sorted(points)]


async def overview(store: AuditStore, window: Window, step: int) -> dict[str, Any]:
    """Every panel of the dashboard page, for the window and its filters."""
    # One pass for the additive figures of both groupings; the percentiles need their own.
    figures = await _figures(store, ("provider", "model"), window)
    by_provider = await _summaries(store, "provider", window, _folded(figures, 0))
    by_model = await _summaries(store, "model", window, _folded(figures, 1))
    if window.provider is None and window.model is None:  # the groups are every choice
        providers = [(s.group,) for s in by_provider]
        models = [(s.group,) for s in by_model]
    else:  # the drop-downs ignore the filters
        choices = Window(window.since, window.until)
        providers = await _read(store, choices, lambda f: sql.choices_sql("provider", f))
        models = await _read(store, choices, lambda f: sql.choices_sql("model", f))
    cut_reasons = await _read(store, window, sql.cut_reason_sql)
    tools = await _read(store, window, lambda f: sql.withheld_tools_sql(f, TOOL_NAMES))
    return {
        "window": {
            "since": window.since,
            "until": window.until,
            "provider": window.provider,
            "model": window.model,
            "step": step,
        },
        "choices": {
            "providers": sorted(row[0] for row in providers),
            "models": sorted(row[0] for row in models),
        },
        "totals": totals(by_provider),
        "by_provider": [summary_object(s) for s in by_provider],
        "by_model": [summary_object(s) for s in by_model],
        "series": await series(store, window, step),
        "cut_reasons": sorted(
            ({"reason": r, "count": int(n)} for r, n in cut_reasons),
            key=lambda item: (-item["count"], item["reason"]),
        ),
        "withheld_tools": [{"name": name, "count": int(n)} for name, n in tools],
        "latest_cut": [truncated_object(t) for t in await latest_cut(store, window, LATEST_CUT)],
    }


def totals(groups: Sequence[GroupSummary]) -> dict[str, Any]:
    """The window's figures in all: the groups' sums (every record is in exactly one group)."""
    requests = sum(s.requests for s in groups)
    truncated = sum(s.truncated for s in groups)
    costs = [s.cost_usd for s in groups if s.cost_usd is not None]
    return {
        "requests": requests,
        "errors": sum(s.errors for s in groups),
        "truncated": truncated,
        "truncated_rate": round(truncated / requests, 4) if requests else 0.0,
        "withheld_tool_calls": sum(s.withheld_tool_calls for s in groups),
        "retried": sum(s.retried for s in groups),
        "fallbacks": sum(s.fallbacks for s in groups),
        "recovered": sum(s.recovered for s in groups),
        "cost_usd": sum(costs) if costs else None,
        "cost_unknown": sum(s.cost_unknown for s in groups),
        "input_tokens": sum(s.input_tokens for s in groups),
        "output_tokens": sum(s.output_tokens for s in groups),
    }
