"""From the raw runs of the matrix to one summary per cell: medians over repetitions, and the
comparisons taken within each repetition (`gateway_bench.stats`).

Per cell and target: requests/s, p50 and p99 latency, time to first byte, CPU per request
(the target's process tree, from /proc; for `direct`, the fake upstream's), peak RSS, errors.
Per gateway: what it adds to the direct run of the same cell (p50, p99, first byte) and its
throughput as a share of direct. Per compared gateway: its throughput and CPU per request over
the gateway's (so "30x" reads at a glance). Per streamed cell: CPU per chunk, derived as
(CPU per streamed request - CPU per non-streamed request of the same format and concurrency)
/ chunks, per repetition.

    cells = summarize(plan, records, ["direct", "gateway", "litellm"])
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from gateway_bench import stats
from gateway_bench.plan import Cell, Plan

Record = Mapping[str, Any]


def _server(record: Record) -> Mapping[str, Any]:
    server: Mapping[str, Any] = record.get("servers", {}).get("server") or {}
    return server


def cpu_percent(record: Record) -> float | None:
    """The share of one core the target's tree used over the window: near 100 for one process,
    it was CPU-bound; far below while its latency grew, it was waiting for a core (others')."""
    cpu, elapsed = _server(record).get("cpu_s"), record.get("elapsed_s")
    return cpu * 100 / elapsed if cpu is not None and elapsed else None


FIELDS: Final[Mapping[str, Callable[[Record], float | None]]] = {
    "rps": lambda r: r["rps"] if r["ok"] else None,
    "p50_ms": lambda r: r["latency_ms"]["p50"],
    "p99_ms": lambda r: r["latency_ms"]["p99"],
    "ttfb_p50_ms": lambda r: r["ttfb_ms"]["p50"],
    "cpu_ms_per_req": lambda r: r.get("cpu_ms_per_req"),
    "cpu_percent": cpu_percent,
    "rss_max_mb": lambda r: _server(r).get("rss_max_mb"),
}


class Runs:
    """The records of one matrix, found by (cell, target) and ordered by repetition."""

    def __init__(self, records: Sequence[Record], reps: int) -> None:
        self.reps = reps
        self._by: dict[tuple[str, str], list[Record | None]] = {}
        for record in records:
            slot = self._by.setdefault((record["cell"], record["target"]), [None] * reps)
            slot[record["rep"]] = record

    def of(self, cell: str, target: str) -> list[Record | None]:
        return self._by.get((cell, target), [None] * self.reps)

    def values(self, cell: str, target: str, field: str) -> list[float | None]:
        getter = FIELDS[field]
        return [None if r is None else getter(r) for r in self.of(cell, target)]


def target_summary(runs: Runs, cell: str, target: str) -> dict[str, Any]:
    records = [r for r in runs.of(cell, target) if r is not None]
    out: dict[str, Any] = {
        field: stats.median(runs.values(cell, target, field))
        for field in FIELDS
        if field != "rss_max_mb"
    }
    rss = [v for v in runs.values(cell, target, "rss_max_mb") if v is not None]
    out["rss_max_mb"] = max(rss) if rss else None
    errors: collections.Counter[str] = collections.Counter()
    for record in records:
        errors.update(record["errors"])
        errors.update({f"warm-up: {k}": v for k, v in record.get("warmup_errors", {}).items()})
    out["errors"] = dict(errors)
    out["error_count"] = sum(errors.values())
    out["ok"] = sum(r["ok"] for r in records)
    levels: collections.Counter[str] = collections.Counter()
    for record in records:
        levels.update(record.get("gateway_log", {}).get("levels", {}))
    if levels:
        out["gateway_log"] = dict(levels)
    return out


def whole_cell(cell: Cell) -> str:
    """The non-streamed cell of the same format and concurrency: the base of CPU per chunk."""
    return f"nonstream/{cell.format.name}/c{cell.concurrency}"


def summarize(plan: Plan, records: Sequence[Record], names: Sequence[str]) -> list[dict[str, Any]]:
    """`names`: the targets in order, `direct` first and the gateway second."""
    runs = Runs(records, plan.reps)
    direct, gateway = names[0], names[1] if len(names) > 1 else None
    out = []
    for cell in plan.cells():
        key = cell.key
        summary: dict[str, Any] = {
            "cell": key,
            "mode": cell.mode.name,
            "format": cell.format.name,
            "concurrency": cell.concurrency,
            "targets": {name: target_summary(runs, key, name) for name in names},
            "vs_direct": {},
            "vs_gateway": {},
            "cpu_us_per_chunk": {},
        }
        for name in names[1:]:
            summary["vs_direct"][name] = {
                "added_p50_ms": difference(runs, key, name, direct, "p50_ms"),
                "added_p99_ms": difference(runs, key, name, direct, "p99_ms"),
                "added_ttfb_p50_ms": difference(runs, key, name, direct, "ttfb_p50_ms"),
                "rps_ratio": ratio(runs, key, name, direct, "rps"),
            }
        if gateway is not None:
            for name in names[2:]:
                summary["vs_gateway"][name] = {
                    "rps_ratio": ratio(runs, key, name, gateway, "rps"),
                    "cpu_ratio": ratio(runs, key, name, gateway, "cpu_ms_per_req"),
                }
        if cell.mode.stream:
            for name in names:
                summary["cpu_us_per_chunk"][name] = per_chunk(runs, cell, name, plan.chunks)
        out.append(summary)
    return out


def difference(runs: Runs, cell: str, name: str, base: str, field: str) -> float | None:
    return stats.per_rep_difference(runs.values(cell, name, field), runs.values(cell, base, field))


def ratio(runs: Runs, cell: str, name: str, base: str, field: str) -> float | None:
    return stats.per_rep_ratio(runs.values(cell, name, field), runs.values(cell, base, field))


def per_chunk(runs: Runs, cell: Cell, name: str, chunks: int) -> float | None:
    streamed = runs.values(cell.key, name, "cpu_ms_per_req")
    whole = runs.values(whole_cell(cell), name, "cpu_ms_per_req")
    per_rep = [stats.cpu_per_chunk(s, w, chunks) for s, w in zip(streamed, whole, strict=True)]
    value = stats.median(per_rep)
    return None if value is None else value * 1000  # ms -> us


def cross_over_same(
    plan: Plan, records: Sequence[Record], name: str, mode: str, concurrency: int
) -> float | None:
    """CPU per request of the cross-format cell over the same-format one, per repetition."""
    runs = Runs(records, plan.reps)
    return stats.per_rep_ratio(
        runs.values(f"{mode}/cross/c{concurrency}", name, "cpu_ms_per_req"),
        runs.values(f"{mode}/same/c{concurrency}", name, "cpu_ms_per_req"),
    )
