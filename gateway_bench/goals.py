"""The gateway's performance targets, as a checklist with the measured figure of each.

Each goal reads one figure off the run's summaries for a target, at the concurrency it is
judged at: the highest of the run for costs (a loaded gateway, where CPU per request is what
bounds throughput), concurrency 1 for added latency. The figure at every concurrency is kept
beside it. Goals are judged for the bench's gateway; other targets' figures are shown for
comparison, never judged.

    rows = check(plan, cells, records, idle, ["gateway", "litellm"])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway_bench.plan import Plan
from gateway_bench.summary import Record, cross_over_same


@dataclass(frozen=True, slots=True)
class Context:
    plan: Plan
    cells: Mapping[str, Mapping[str, Any]]
    records: Sequence[Record]
    idle: Mapping[str, Any]

    @property
    def top(self) -> int:
        return max(self.plan.concurrency)

    def cell(self, key: str) -> Mapping[str, Any]:
        return self.cells.get(key, {})


Measure = Callable[[Context, str, int], float | None]


def target_field(mode: str, field: str) -> Measure:
    def measure(ctx: Context, name: str, concurrency: int) -> float | None:
        figures = ctx.cell(f"{mode}/same/c{concurrency}").get("targets", {}).get(name, {})
        value: float | None = figures.get(field)
        return value

    return measure


def per_chunk(mode: str) -> Measure:
    def measure(ctx: Context, name: str, concurrency: int) -> float | None:
        value: float | None = (
            ctx.cell(f"{mode}/same/c{concurrency}").get("cpu_us_per_chunk", {}).get(name)
        )
        return value

    return measure


def added_p50(ctx: Context, name: str, concurrency: int) -> float | None:
    vs = ctx.cell(f"nonstream/same/c{concurrency}").get("vs_direct", {}).get(name, {})
    value: float | None = vs.get("added_p50_ms")
    return value


def peak_rss(ctx: Context, name: str, concurrency: int) -> float | None:
    peaks = [
        cell["targets"].get(name, {}).get("rss_max_mb")
        for cell in ctx.cells.values()
        if cell["concurrency"] == concurrency
    ]
    present = [p for p in peaks if p is not None]
    return max(present) if present else None


def cross_ratio(ctx: Context, name: str, concurrency: int) -> float | None:
    return cross_over_same(ctx.plan, ctx.records, name, "nonstream", concurrency)


def idle_stream_kb(ctx: Context, name: str, concurrency: int) -> float | None:
    levels = ctx.idle.get(name, {}).get("levels") or []
    value: float | None = levels[-1]["kb_per_stream"] if levels else None
    return value


def idle_flat(ctx: Context, name: str, value: float) -> bool | None:
    flat: bool | None = ctx.idle.get(name, {}).get("flat")
    return flat


@dataclass(frozen=True, slots=True)
class Goal:
    name: str
    limit: str
    unit: str
    measure: Measure
    judge: Callable[[Context, str, float], bool | None]
    at: str = "top"  # "top": the run's highest concurrency; "one": concurrency 1; "" none


def at_most(limit: float) -> Callable[[Context, str, float], bool | None]:
    return lambda ctx, name, value: value <= limit


def below(limit: float) -> Callable[[Context, str, float], bool | None]:
    return lambda ctx, name, value: value < limit


GOALS: Final = (
    Goal(
        "CPU per non-streamed request",
        "<= 0.25",
        "ms",
        target_field("nonstream", "cpu_ms_per_req"),
        at_most(0.25),
    ),
    Goal("CPU per relayed chunk, burst", "<= 10", "us", per_chunk("burst"), at_most(10)),
    Goal("CPU per relayed chunk, paced", "<= 25", "us", per_chunk("paced"), at_most(25)),
    Goal("Added p50 latency, non-stream", "<= 0.4", "ms", added_p50, at_most(0.4), "one"),
    Goal("RSS at concurrency 64", "< 64", "MB", peak_rss, below(64), "64"),
    Goal("Cross-format CPU / same-format", "<= 1.2", "x", cross_ratio, at_most(1.2)),
    Goal("Memory per idle open stream", "flat", "KB", idle_stream_kb, idle_flat, ""),
)


def concurrency_of(goal: Goal, plan: Plan) -> int | None:
    if goal.at == "top":
        return max(plan.concurrency)
    if goal.at == "one":
        return 1 if 1 in plan.concurrency else None
    if goal.at.isdigit():  # that concurrency, else the run's highest (the row says which)
        return int(goal.at) if int(goal.at) in plan.concurrency else max(plan.concurrency)
    return 0


def check(
    plan: Plan,
    cells: Sequence[Mapping[str, Any]],
    records: Sequence[Record],
    idle: Mapping[str, Any],
    names: Sequence[str],
) -> list[dict[str, Any]]:
    """One row per goal: the figure per target (first name judged), and per concurrency."""
    ctx = Context(plan, {cell["cell"]: cell for cell in cells}, records, idle)
    rows = []
    for goal in GOALS:
        at = concurrency_of(goal, plan)
        values = {name: None if at is None else goal.measure(ctx, name, at) for name in names}
        every = {
            name: {c: goal.measure(ctx, name, c) for c in plan.concurrency}
            for name in names
            if goal.at == "top"
        }
        judged = values.get(names[0]) if names else None
        passed = None if judged is None else goal.judge(ctx, names[0], judged)
        rows.append(
            {
                "goal": goal.name,
                "limit": f"{goal.limit} {goal.unit}" if goal.limit != "flat" else "flat",
                "unit": goal.unit,
                "concurrency": at or None,
                "values": values,
                "by_concurrency": every,
                "pass": passed,
            }
        )
    return rows
