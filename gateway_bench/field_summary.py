"""The field suite's figures, from its runs: per workload and target, and per target.

Latency figures are medians over the trials of each trial's percentile (the field's method);
their ratios to the direct call are taken within a trial, then medianed (`stats.per_rep_ratio`).
Throughput: each sweep concurrency's median over the trials; the peak is the highest of those,
and its ratio is the per-trial peak over the direct call's per-trial peak. Memory is the peak
over every run of the target (its process tree, and its largest process: one worker under a
supervisor); cold start the median of the starts. Every figure that has a direct counterpart
carries its ratio to it (`x_direct`): the fake upstream on the same machine in the same run.

    summary = summarize(plan, records, cold_starts, names)
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateway_bench.field_plan import FieldPlan
from gateway_bench.field_run import LATENCY, SWEEP
from gateway_bench.stats import median, per_rep_ratio

DIRECT = "direct"


def by_trial(records: Iterable[Mapping[str, Any]], trials: int) -> list[Mapping[str, Any] | None]:
    slots: list[Mapping[str, Any] | None] = [None] * trials
    for record in records:
        slots[record["rep"]] = record
    return slots


def figure(record: Mapping[str, Any] | None, key: str, point: str) -> float | None:
    if record is None or not record.get("ok"):
        return None
    value = (record.get(key) or {}).get(point)
    return float(value) if value is not None else None


def latency_row(
    plan: FieldPlan, mine: Sequence[Mapping[str, Any]], direct: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    ours, theirs = by_trial(mine, plan.trials), by_trial(direct, plan.trials)
    row: dict[str, Any] = {}
    for key, name in (("latency_ms", "p"), ("ttft_ms", "ttft_p")):
        for point in ("p50", "p99"):
            values = [figure(r, key, point) for r in ours]
            bases = [figure(r, key, point) for r in theirs]
            row[f"{name}{point[1:]}_ms"] = median(values)
            row[f"{name}{point[1:]}_x_direct"] = per_rep_ratio(values, bases)
    row["latency_rps"] = median([r["rps"] if r else None for r in ours])
    return row


def sweep_row(
    plan: FieldPlan, mine: Sequence[Mapping[str, Any]], direct: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    rps: dict[int, list[float | None]] = {c: [None] * plan.trials for c in plan.sweep}
    cpu: dict[int, list[float | None]] = {c: [None] * plan.trials for c in plan.sweep}
    base: dict[int, list[float | None]] = {c: [None] * plan.trials for c in plan.sweep}
    for record in mine:
        rps[record["concurrency"]][record["rep"]] = record["rps"] if record["ok"] else None
        cpu[record["concurrency"]][record["rep"]] = record.get("cpu_ms_per_req")
    for record in direct:
        base[record["concurrency"]][record["rep"]] = record["rps"] if record["ok"] else None
    by_concurrency = {c: median(values) for c, values in rps.items()}
    present = {c: v for c, v in by_concurrency.items() if v is not None}
    peak_at = max(present, key=lambda c: present[c]) if present else None

    def trial_peaks(table: Mapping[int, list[float | None]]) -> list[float | None]:
        peaks = []
        for trial in range(plan.trials):
            values = [x for x in (v[trial] for v in table.values()) if x is not None]
            peaks.append(max(values) if values else None)
        return peaks

    return {
        "rps_by_concurrency": {str(c): v for c, v in by_concurrency.items()},
        "peak_rps": present.get(peak_at) if peak_at is not None else None,
        "peak_at": peak_at,
        "peak_x_direct": per_rep_ratio(trial_peaks(rps), trial_peaks(base)),
        "cpu_ms_per_req_at_peak": median(cpu[peak_at]) if peak_at is not None else None,
    }


def errors_of(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for record in records:
        counts.update(record.get("errors") or {})
    return dict(counts)


def memory_of(records: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    trees, largest = [], []
    for record in records:
        server = (record.get("servers") or {}).get("server")
        if server:
            trees.append(server["rss_max_mb"])
            largest.append(server.get("process_rss_max_mb", server["rss_max_mb"]))
    return {
        "rss_mb": max(trees) if trees else None,
        "process_rss_mb": max(largest) if largest else None,
    }


def ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def summarize(
    plan: FieldPlan,
    records: Sequence[Mapping[str, Any]],
    cold_starts: Mapping[str, Sequence[float]],
    names: Sequence[str],
) -> dict[str, Any]:
    """`names`: the targets, direct first. `cold_starts`: seconds per start, by target name."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = collections.defaultdict(list)
    for record in records:
        groups[(record["phase"], record["workload"], record["target"])].append(record)
    rows = []
    for workload in plan.workloads():
        for name in names:
            row: dict[str, Any] = {
                "workload": workload.name,
                "label": workload.label,
                "api": workload.api,
                "stream": workload.stream,
                "target": name,
            }
            for phase, build in ((LATENCY, latency_row), (SWEEP, sweep_row)):
                mine = groups[(phase, workload.name, name)]
                row.update(build(plan, mine, groups[(phase, workload.name, DIRECT)]))
            mine = groups[(LATENCY, workload.name, name)] + groups[(SWEEP, workload.name, name)]
            row["errors"] = errors_of(mine)
            rows.append(row)
    starts = {name: sorted(values) for name, values in cold_starts.items() if values}
    direct_start = median(starts.get(DIRECT, []))
    footprint = []
    direct_memory = memory_of(r for r in records if r["target"] == DIRECT)
    for name in names:
        memory = memory_of(r for r in records if r["target"] == name)
        runs = starts.get(name, [])
        cold = median(runs)
        footprint.append(
            {
                "target": name,
                **memory,
                "rss_x_direct": ratio(memory["rss_mb"], direct_memory["rss_mb"]),
                "process_rss_x_direct": ratio(
                    memory["process_rss_mb"], direct_memory["process_rss_mb"]
                ),
                "cold_start_s": cold,
                "cold_start_runs_s": runs,
                "cold_start_x_direct": ratio(cold, direct_start),
            }
        )
    return {"workloads": rows, "footprint": footprint}
